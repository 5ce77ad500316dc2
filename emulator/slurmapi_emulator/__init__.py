"""slurmapi-emulator: a local stand-in of the Slurm Job API (`callSlurmRestApi`).

It serves the same envelope as Google's API in front of a one-node Slurm whose jobs are real
local processes (or in front of a real slurmrestd, in gateway mode), with Google-style auth and
injectable faults. It imports nothing from the provider, so it can judge the provider's client; it is
its own distribution (`slurmapi-emulator`) so the provider's wheel does not carry it into Airflow images.

    from slurmapi_emulator import EmulatorConfig, run_emulator

    with run_emulator(EmulatorConfig(tokens=["t"], minute_seconds=1)) as emu:
        hook_endpoint = emu.url
"""

from .config import EmulatorConfig
from .runner import EmulatorHandle, run_emulator

__all__ = ["EmulatorConfig", "EmulatorHandle", "run_emulator"]
