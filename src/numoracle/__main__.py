"""``python -m numoracle``: the command line."""

import sys

from .cli.app import main

sys.exit(main())
