"""Which triggerer runs the Slurm trigger when ``[triggerer] queues_enabled`` is set: the deferring task's queue.

Airflow decides it from public class attributes of ``BaseTrigger``, named differently by version: 3.2 and
3.3 read ``supports_triggerer_queue``, 3.4 reads ``trigger_queue_inherited_from_task`` and a trigger's own
``queue`` (a class attribute, ``None``: not assigned). The trigger that a real deferral builds is read with
the name this Airflow's ``BaseTrigger`` declares; Airflow 2.11, 2.10.5 and 3.1 have no trigger queues.
"""

from __future__ import annotations

import pytest
from airflow.triggers.base import BaseTrigger

from airflow_provider_slurmapi.triggers.slurm import SlurmJobTrigger
from tests.unit.operators.test_submit_reattach import NEW, TaskDeferred, operator
from tests.unit.recorded_slurm import LIVE_RUNNING, RecordedSlurm
from tests.unit.task_instance import StateStore, TaskInstance, task_context

# The attribute each Airflow reads in the task runner's _defer_task, newest first.
QUEUE_FLAGS = ("trigger_queue_inherited_from_task", "supports_triggerer_queue")


def deferred_trigger() -> BaseTrigger:
    slurm = RecordedSlurm()
    slurm.accepts_submit(NEW)
    slurm.job(NEW, LIVE_RUNNING)
    with pytest.raises(TaskDeferred) as deferred:
        operator(slurm, queue="a3-triggers").execute(task_context(TaskInstance(try_number=1), StateStore()))
    trigger = deferred.value.trigger
    assert isinstance(trigger, SlurmJobTrigger) and trigger.job_id == NEW
    return trigger


def test_the_trigger_follows_the_deferring_tasks_queue_on_this_airflow() -> None:
    declared = [name for name in QUEUE_FLAGS if name in vars(BaseTrigger)]
    if not declared:
        pytest.skip("this Airflow (2.x, 3.1) has no triggerer queues: nothing decides a trigger's queue")
    # one name, not both: a base class that declared both would leave it unclear which one Airflow reads
    assert len(declared) == 1, declared
    trigger = deferred_trigger()
    assert getattr(trigger, declared[0]) is True
    if declared[0] == "trigger_queue_inherited_from_task":  # 3.4: no queue of its own, or it would win
        assert "queue" in vars(BaseTrigger) and trigger.queue is None
        # the trigger's serialized form carries no queue either: a rebuilt trigger has none
        assert "queue" not in trigger.serialize()[1]


def test_the_trigger_says_both_names_so_neither_airflow_falls_back_to_a_base_default() -> None:
    assert SlurmJobTrigger.supports_triggerer_queue is True
    assert SlurmJobTrigger.trigger_queue_inherited_from_task is True
