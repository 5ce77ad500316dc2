"""The Slurm Job API without Airflow, in sub-packages that import downwards only
(api < jobs < submit < client; tests/unit/test_layers.py checks it):

- ``api/``: the transport's side: envelope, REST paths, API versions, retry, errors, plans, cluster, values;
- ``jobs/``: the job model and its readers, states, arrays, accounting, the watch, a record's ``Extra``;
- ``submit/``: spec, ``#SBATCH`` lines, time forms, the tag, the wrapped script;
- ``node/``: the supervisor that runs on the node (its text is embedded, never imported);
- ``client.py`` on top (the facade over the three sides), and ``reaper.py`` over it.

Hooks sit on top of this layer; nothing here imports Airflow.
"""
