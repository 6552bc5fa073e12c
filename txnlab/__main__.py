import sys

from txnlab.cli import main

sys.exit(main())
