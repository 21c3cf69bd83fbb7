import sys

from torchconform.cli.main import main

sys.exit(main())
