"""The submit side: what a submit sends (spec, #SBATCH lines, time forms, the tag, the wrapped script)."""
