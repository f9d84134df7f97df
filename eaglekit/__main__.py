import sys

from eaglekit.cli import main

sys.exit(main())
