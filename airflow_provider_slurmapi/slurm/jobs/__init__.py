"""The job side: the job model and what reads jobs (readers, states, arrays, accounting, watch, Extra)."""
