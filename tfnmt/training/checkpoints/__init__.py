"""Checkpoints: the last K every N steps, the K best by a validation metric, robust restore
(keeping.py); the state file and best.json (state.py); damaged checkpoints set aside and killed
saves cleaned up (damage.py); what the verbs restore, and warm starts (restoring.py).
"""

from tfnmt.training.checkpoints.damage import remove_leftovers
from tfnmt.training.checkpoints.keeping import DATA_STATE, Checkpoints, trackables
from tfnmt.training.checkpoints.restoring import (resolve, resolve_init_from, restore,
                                                  restore_model, restored_each, warm_start)
from tfnmt.training.checkpoints.state import BEST_DIR, LAST_DIR, list_checkpoints, read_best_index

__all__ = ["BEST_DIR", "DATA_STATE", "LAST_DIR", "Checkpoints", "list_checkpoints",
           "read_best_index", "remove_leftovers", "resolve", "resolve_init_from", "restore",
           "restore_model", "restored_each", "trackables", "warm_start"]
