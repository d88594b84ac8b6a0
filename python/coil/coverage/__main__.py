import sys

from coil.coverage.cli import main

sys.exit(main())
