"""`python -m slurmapi_emulator` runs the CLI, like the slurmapi-emulator script."""

from .cli import main

raise SystemExit(main())
