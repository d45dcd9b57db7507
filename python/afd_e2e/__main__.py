import sys

from afd_e2e.cli import main

sys.exit(main())
