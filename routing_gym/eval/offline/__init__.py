"""Off-policy evaluation (``ope``) and logged datasets for offline RL (``dataset``)."""
