"""`python -m aicfc.distributed --nproc N script.py ...`: the launcher (aicfc-launch)."""

from aicfc.distributed.launch import run

if __name__ == "__main__":
    run()
