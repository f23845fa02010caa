import sys

from routing_gym.cli import main

sys.exit(main())
