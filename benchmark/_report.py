"""Shared by the benchmark scripts: print a result and keep it as JSON."""

import json
from pathlib import Path
from typing import Any, Dict, Optional


def emit(result: Dict[str, Any], out: Optional[str]) -> int:
    text = json.dumps(result, indent=2)
    if out:
        Path(out).write_text(text + "\n")
    print(text)
    return 0
