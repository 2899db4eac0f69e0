import sys

from imagebump.cli import main

sys.exit(main())
