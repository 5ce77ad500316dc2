#!/bin/bash
# A script file of the DAG folder, rendered by Jinja: {{ task.task_id }}.
# It records the bytes Slurm stored for it ($0 is the copy the node runs).
sha256sum < "$0" > "bytes-$SLURM_JOB_ID.txt"
