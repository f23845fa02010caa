"""Data shipped with routing-gym: data cards and small procedural tournaments.

Installed as the import package ``routing_gym_envs_data`` so that wheels carry it too.
"""
