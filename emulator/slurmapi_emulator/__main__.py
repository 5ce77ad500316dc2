"""`python -m airflow_provider_slurmapi.emulator` runs the CLI, like the slurmapi-emulator script."""

from .cli import main

raise SystemExit(main())
