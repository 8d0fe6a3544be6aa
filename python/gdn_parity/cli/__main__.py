"""``python -m gdn_parity.cli``."""

import sys

from gdn_parity.cli.main import main

sys.exit(main())
