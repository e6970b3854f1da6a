import sys

from trtls.cli.main import main

sys.exit(main())
