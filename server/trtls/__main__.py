import sys

from trtls.cli.entry import main

sys.exit(main())
