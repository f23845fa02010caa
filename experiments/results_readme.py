"""The README of a results folder, written by the script that filled the folder.

Every study script under ``experiments/`` ends with ``write_readme(out, title, about)``: the
README names the exact command that wrote the folder (this process's own command line, with
paths made relative to the repository, so no machine path is committed), the commit it ran
on, and what the files hold. Rerunning that command regenerates the folder, README included.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Environment variables a study reads, shown in the command in the project's own spelling.
SHOWN_ENV = {"ROUTING_GYM_DATA_DIR": "../shared/data", "OMP_NUM_THREADS": None}


def _relative(arg: str) -> str:
    """A path argument relative to the repository (or the working directory), never absolute."""
    if not os.path.isabs(arg):
        return arg
    path = Path(arg).resolve()
    for base in (REPO, Path.cwd()):
        try:
            return str(path.relative_to(base)) or "."
        except ValueError:
            continue
    return path.name  # outside the repository: keep only the last part, as the results do


def command_line(argv: list[str] | None = None) -> str:
    """This process's command as a user would type it in the repository root."""
    argv = list(sys.argv if argv is None else argv)
    script = _relative(str(Path(argv[0]).resolve())) if argv and argv[0].endswith(".py") else argv[0]
    env = [f"{name}={shown or os.environ[name]}" for name, shown in SHOWN_ENV.items() if name in os.environ]
    args = [f"{arg.split('=', 1)[0]}={_relative(arg.split('=', 1)[1])}" if arg.startswith("--") and "=" in arg
            else _relative(arg) for arg in argv[1:]]
    words = [*env, "python", script, *args]
    return " ".join(shlex.quote(word) if not word.split("=", 1)[0].isupper() else word for word in words)


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    # Only the code a result depends on counts (docs edits do not change a table).
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "--",
                            "routing_gym", "agents", "envs_data", "experiments/*.py", "pyproject.toml"],
                           capture_output=True, text=True, timeout=10).stdout.strip()
    return out + (" with uncommitted changes to the code" if dirty else "")


# The commit the study started on (a long run may outlive several commits of the working tree).
STARTED_ON = commit()


def write_readme(out: str | Path, title: str, about: str, argv: list[str] | None = None,
                 started_on: str | None = None) -> Path:
    """Write ``out/README.md``: the title, the command that wrote the folder, then ``about``
    (what the files hold and how to read them; Markdown). ``started_on``: the commit the results
    came from, when the README is rewritten later from a folder's files (default: ``STARTED_ON``).
    Returns the README's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = (f"# {title}\n\n"
            f"Written by this command, run in the repository root (started on commit {started_on or STARTED_ON}); rerun it to "
            f"regenerate the folder, this README included:\n\n"
            f"```bash\n{command_line(argv)}\n```\n\n{about.strip()}\n")
    path = out / "README.md"
    path.write_text(text)
    return path


def write_index(parent: str | Path, title: str, about: str) -> Path:
    """The README of a folder of runs (one sub-folder per tournament, each with the README its
    run wrote): ``about``, then every sub-folder with the command that wrote it."""
    parent = Path(parent)
    lines = [f"# {title}", "", about.strip(), "", "One folder per run; each folder's README names the command that wrote it:", ""]
    for folder in sorted(p for p in parent.iterdir() if p.is_dir()):
        readme = folder / "README.md"
        command = readme.read_text().split("```bash\n", 1)[1].split("\n```", 1)[0] if readme.exists() else None
        lines.append(f"- `{folder.name}/`: `{command}`" if command else f"- `{folder.name}/`: no README (not rerun by this script)")
    path = parent / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path
