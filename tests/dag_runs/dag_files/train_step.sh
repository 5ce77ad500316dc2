#!/bin/bash
# Read from the DAG folder and rendered by Jinja before it is submitted.
echo "rendered for {{ dag.dag_id }}/{{ task.task_id }}"
