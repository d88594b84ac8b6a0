import sys

from coil.cli import main

sys.exit(main())
