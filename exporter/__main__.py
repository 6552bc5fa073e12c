"""`python -m exporter`: the same as `txnlab exporter`."""
import sys

from exporter.app import main

if __name__ == "__main__":
    sys.exit(main())
