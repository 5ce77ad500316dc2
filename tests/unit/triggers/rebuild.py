"""``import_string`` as the triggerer uses it to rebuild a trigger from ``serialize()``'s classpath.

Airflow 3 has it in ``airflow.sdk.module_loading``, Airflow 2 in ``airflow.utils.module_loading``; both
import the module and take the attribute, as this does, so the trigger tests run on every version.
"""

from __future__ import annotations

import importlib
from typing import Any


def import_string(dotted_path: str) -> Any:
    module_path, _, name = dotted_path.rpartition(".")
    if not module_path:
        raise ImportError(f"{dotted_path} is not a dotted module path")
    return getattr(importlib.import_module(module_path), name)
