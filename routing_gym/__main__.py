import sys

from routing_gym.cli import main

if __name__ == "__main__":  # importing the module (autodoc does) must not run the CLI
    sys.exit(main())
