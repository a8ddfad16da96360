"""Reading docker/compose.yaml the way Compose does, for the static checks (no Docker engine here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
_INTERPOLATION = re.compile(r"\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}")
_CODE_READS_ENV = re.compile(
    r"""(?:os\.environ(?:\.get|\.setdefault)?\(\s*|os\.environ\[\s*|os\.getenv\(\s*|envvar=)["']([A-Z][A-Z0-9_]+)["']""")


def load_compose() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(COMPOSE.read_text())


def interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${NAME:-default}``: the variable if set in ``env``, else the default."""
    env = env or {}
    return _INTERPOLATION.sub(lambda m: env.get(m.group(1), m.group(2) or ""), value)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def env_names_read_by_code() -> set[str]:
    """Environment variable names read in engine/, checkpoints/ and plugins/ (os.environ, getenv, click envvar)."""
    names = set()
    for folder in ("engine", "checkpoints", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(_CODE_READS_ENV.findall(path.read_text()))
    return names
