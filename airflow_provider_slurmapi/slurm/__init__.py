"""The Slurm Job API without Airflow: envelope, paths, versions, job states, job model, errors.

Hooks sit on top of this layer; nothing here imports Airflow.
"""
