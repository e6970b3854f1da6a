from trtls.cli.main import main

raise SystemExit(main())
