#!/bin/bash
# A script file ending in .bash, read from the DAG folder and rendered.
echo "bash file for {{ task.task_id }}"
