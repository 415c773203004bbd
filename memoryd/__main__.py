"""``python -m memoryd`` is the ``memoryd`` command."""

import sys

from memoryd.cli import main

sys.exit(main())
