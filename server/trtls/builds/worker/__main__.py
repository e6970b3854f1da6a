"""`python -m trtls.builds.worker`: the build worker's entry point (the protocol is docs/protocol.md)."""

import sys

from trtls.builds.worker.main import main

sys.exit(main())
