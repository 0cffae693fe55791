"""The lab's training job: a small, deterministic numpy training loop that checkpoints to the lab's MinIO.

It makes the claim of docs/checkpoints.md testable end to end: a job killed while writing a checkpoint,
backed up, restored into a new lab and resumed continues from the last complete checkpoint, bit for bit
(`model` is the training, `checkpoint` the safetensors layout and its marker, `__main__` the process).
"""
