"""``@task.slurm``: a TaskFlow function that returns the batch script; the submit operator runs it.

As ``@task.bash`` returns a command, the function returns the script (or a file of the DAG folder:
one line ending in ``.sh``, ``.sbatch``, ``.slurm`` or ``.bash``); the decorator's keyword arguments
are those of :class:`SlurmSubmitJobOperator` (``job``, ``region``, ``cluster_id``, ``deferrable``...).
The function runs on the worker when the task starts.

The returned text is submitted byte for byte, not rendered by Jinja (``@task.bash`` renders its command):
the function already has its arguments rendered and any context key it names, and a value it was
given (``dag_run.conf`` is anyone's to set) must never be evaluated as a template. A returned path
is read from the DAG folder (and ``template_searchpath``) and rendered, as ``script="train.sh"`` is:
Airflow's template loader reads no file outside those folders.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_provider_slurmapi._compat import AIRFLOW_V_3_0_PLUS
from airflow_provider_slurmapi.operators.slurm import SlurmSubmitJobOperator, check_line_breaks, is_script_path
from airflow_provider_slurmapi.slurm.api.errors import ConfigurationError

if AIRFLOW_V_3_0_PLUS:
    from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory
    from airflow.sdk.definitions.context import context_merge

    try:
        from airflow.sdk.bases.decorator import determine_kwargs
    except ImportError:  # pragma: no cover - Airflow 3.0
        from airflow.utils.operator_helpers import determine_kwargs  # type: ignore[no-redef,attr-defined]
else:  # pragma: no cover - Airflow 2.11
    from airflow.decorators.base import (  # type: ignore[no-redef,attr-defined,assignment]
        DecoratedOperator,
        TaskDecorator,
        task_decorator_factory,
    )
    from airflow.utils.context import context_merge  # type: ignore[no-redef,attr-defined,assignment]
    from airflow.utils.operator_helpers import determine_kwargs  # type: ignore[no-redef,attr-defined,assignment]

if TYPE_CHECKING:
    from airflow_provider_slurmapi._compat import Context

# What the operator holds as its script until the function returns it (shown in Rendered Template
# before the task has run). A plain string of ours: Airflow's own marker lives in an internal module.
SCRIPT_PLACEHOLDER = "# set when the task runs: the script the @task.slurm function returns"

SCRIPT_HINT = (
    "It must return the batch script as a non-empty string starting with '#!', e.g. "
    "'#!/bin/bash\\nsrun python train.py\\n', or a file of the DAG folder: one line ending in "
    ".sh, .sbatch, .slurm or .bash."
)


class _SlurmDecoratedOperator(DecoratedOperator, SlurmSubmitJobOperator):  # type: ignore[misc,valid-type]
    """Calls the function for the batch script, then submits (and by default waits for) the Slurm job.

    :param python_callable: the function that returns the script.
    :param op_args: positional arguments of the function (templated).
    :param op_kwargs: keyword arguments of the function (templated).
    """

    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, *SlurmSubmitJobOperator.template_fields)
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **DecoratedOperator.template_fields_renderers,
        **SlurmSubmitJobOperator.template_fields_renderers,
    }
    custom_operator_name: str = "@task.slurm"
    script_written_in_dag: bool = False  # the function returns it when the task runs
    # The Rendered Template tab shows the script the function returned, not the placeholder.
    overwrite_rtif_after_execution: bool = True

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if "script" in kwargs:
            raise TypeError(
                "@task.slurm takes no script= argument: the decorated function returns the script. "
                "Use SlurmSubmitJobOperator(script=...) for a fixed script."
            )
        super().__init__(
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            script=SCRIPT_PLACEHOLDER,
            **kwargs,
        )

    def execute(self, context: Context) -> Any:
        context_merge(context, self.op_kwargs)
        kwargs = determine_kwargs(self.python_callable, self.op_args, context)
        script = self.python_callable(*self.op_args, **kwargs)
        name = getattr(self.python_callable, "__name__", "the @task.slurm function")
        if not isinstance(script, str):
            raise ConfigurationError(f"@task.slurm function {name!r} returned {type(script).__name__}. {SCRIPT_HINT}")
        if not script.strip():
            raise ConfigurationError(f"@task.slurm function {name!r} returned an empty script. {SCRIPT_HINT}")
        self.script = script
        if is_script_path(script):  # a file of the DAG folder: read and rendered as script="train.sh" is
            self._script_file = script
        else:  # submitted byte for byte: only sbatch's rule on line breaks applies
            check_line_breaks(script, f"The script @task.slurm function {name!r} returned", rendered=True)
        return super().execute(context)


def slurm_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> TaskDecorator:
    """Wrap a function that returns a Slurm batch script into a :class:`SlurmSubmitJobOperator` task.

    Registered as ``@task.slurm``; keyword arguments are the submit operator's.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        decorated_operator_class=_SlurmDecoratedOperator,
        **kwargs,
    )
