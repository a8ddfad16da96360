"""One flag name per concept across the ``sluice`` verbs (issue 18), checked on the real command tree.

The test walks every command click builds for ``sluice`` (groups included) and reads each parameter's
destination (the name the verb's function receives) and its spelling on the command line.  A positional
argument ``JOB_ID`` is spelled ``--job-id`` for the comparison, so ``run --job-id`` and ``status JOB_ID`` agree.

The table below groups destinations that name one concept (different verbs' functions may call the savepoint
directory ``target`` or ``savepoint_root``); every other destination is its own concept.  Then:

- a concept is spelled one way in every verb that takes it (no ``--savepoints`` here and ``--savepoint-dir``
  there);
- a spelling names one concept in every verb (``--output`` is not the job's output folder in ``run`` and a
  file to write a page to in ``view``);
- an old spelling is a hidden alias filling the concept's destination, and says it is deprecated when used.
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from engine.cli import main

#: concept -> (its one spelling, the destinations verbs' functions give it)
CONCEPTS: dict[str, tuple[str, frozenset[str]]] = {
    "checkpoint storage root": ("--storage", frozenset({"storage"})),
    "savepoint directory": ("--savepoint-dir", frozenset({"savepoint_dir", "savepoint_root", "target"})),
    "job id": ("--job-id", frozenset({"job_id", "job_name"})),
    "job spec (module:function)": ("--job", frozenset({"job", "job_spec"})),
    "the job's output folder": ("--output", frozenset({"output", "outputs"})),
    "JSON instead of lines for a person": ("--json", frozenset({"as_json"})),
    "parallelism": ("--parallelism", frozenset({"parallelism"})),
    "runtime": ("--runtime", frozenset({"runtime"})),
    "S3-compatible endpoint": ("--endpoint-url", frozenset({"endpoint_url"})),
    "S3 region": ("--region", frozenset({"region"})),
    "control API URL": ("--url", frozenset({"url"})),
    "control API token": ("--token", frozenset({"token"})),
    "restore a drained snapshot": ("--allow-drained", frozenset({"allow_drained"})),
}

#: old spellings kept as hidden aliases: (verb, old flag, the destination it fills)
ALIASES = [
    ("savepoint", "--target", "target"),
    ("stop", "--target", "target"),
    ("checkpoints list", "--savepoints", "savepoint_root"),
    ("checkpoints clean", "--savepoints", "savepoint_root"),
    ("run", "--name", "job_name"),
    ("restore", "--name", "job_name"),
    ("status", "--format", "as_json"),
    ("list", "--format", "as_json"),
    ("checkpoints history", "--format", "as_json"),
    ("view", "--output", "page_file"),
]


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _commands(command, path + (name,))
        else:
            found.append((" ".join(path + (name,)), command))
    return found


def _concept_of(dest: str) -> str:
    return next((concept for concept, (_, dests) in CONCEPTS.items() if dest in dests), dest)


def _spelling(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return "--" + param.name.replace("_", "-")
    return "/".join(sorted(param.opts + param.secondary_opts))


def _visible() -> list[tuple[str, str, str]]:
    """(verb, concept, spelling) of every parameter a user sees in some verb's --help or usage line."""
    return [(verb, _concept_of(p.name), _spelling(p)) for verb, command in _commands(main) for p in command.params
            if not getattr(p, "hidden", False)]


def test_the_walk_sees_every_verb():
    verbs = {verb for verb, _ in _commands(main)}
    assert {"run", "restore", "status", "list", "view", "savepoint", "stop", "cancel", "demo", "inspect", "validate",
            "checkpoints list", "checkpoints clean", "checkpoints history", "prepare-spark"} <= verbs


def test_each_concept_is_spelled_one_way_across_verbs():
    spellings: dict[str, dict[str, list[str]]] = {}
    for verb, concept, spelling in _visible():
        spellings.setdefault(concept, {}).setdefault(spelling, []).append(verb)
    differ = {concept: by for concept, by in spellings.items() if len(by) > 1}
    assert differ == {}, f"one concept, several flag names: {differ}"
    for concept, (flag, _) in CONCEPTS.items():
        assert set(spellings.get(concept, {flag: []})) == {flag}, (concept, spellings.get(concept))


def test_each_flag_names_one_concept_across_verbs():
    concepts: dict[str, dict[str, list[str]]] = {}
    for verb, concept, spelling in _visible():
        concepts.setdefault(spelling, {}).setdefault(concept, []).append(verb)
    differ = {spelling: by for spelling, by in concepts.items() if len(by) > 1}
    assert differ == {}, f"one flag name, several concepts: {differ}"


def test_every_verb_that_reaches_storage_takes_an_s3_endpoint_and_its_region():
    """Every verb but ``demo`` (which works in a local folder) and ``prepare-spark`` (which writes into the
    virtualenv) reads or writes storage, so each takes both (a new user's trial: ``status`` and ``run`` refused
    them while the storage verbs took them)."""
    taking = {verb: {p.name for p in command.params} for verb, command in _commands(main)}
    assert {verb for verb, names in taking.items() if "endpoint_url" in names} == \
        {verb for verb, names in taking.items() if "region" in names} == set(taking) - {"demo", "prepare-spark"}


def test_old_spellings_are_hidden_aliases_that_say_they_are_deprecated():
    commands = dict(_commands(main))
    for verb, old, dest in ALIASES:
        aliases = [p for p in commands[verb].params if old in p.opts]
        assert len(aliases) == 1 and aliases[0].hidden, (verb, old)
        assert aliases[0].name.split("__")[0] == dest, (verb, old, aliases[0].name)  # deprecated_alias's naming
        assert dest in {p.name for p in commands[verb].params if not getattr(p, "hidden", False)}, (verb, dest)
        assert old not in commands[verb].get_help(click.Context(commands[verb], info_name=verb)), (verb, old)


@pytest.mark.parametrize(("args", "old", "new"), [
    (["status", "nosuchjob", "--url", "http://127.0.0.1:9", "--format", "json"], "--format", "--json"),
    (["run", "engine.examples.purchases:build", "--name", "x", "--option", "no_such_key=1"], "--name", "--job-id"),
    (["view", "nosuchjob", "--url", "http://127.0.0.1:9", "--output", "x.html"], "--output", "--file"),
])
def test_an_old_spelling_names_the_new_one_when_used(args: list[str], old: str, new: str):
    result = CliRunner().invoke(main, args)
    assert f"DeprecationWarning: {old} is deprecated; use {new}" in result.stderr, result.output


def _verbs_taking(dest: str) -> list[tuple[str, click.Command]]:
    return [(verb, command) for verb, command in _commands(main) if dest in {p.name for p in command.params}]


@pytest.mark.parametrize("verb", [verb for verb, _ in _verbs_taking("storage")])
def test_a_storage_root_no_backend_serves_is_refused_naming_the_flag_in_every_verb(verb: str, tmp_path):
    command = dict(_commands(main))[verb]
    arguments = ["x" for p in command.params if isinstance(p, click.Argument)]
    result = CliRunner().invoke(main, [*verb.split(), *arguments, "--storage", "gs://bucket/prefix"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--storage': unsupported storage scheme 'gs'" in " ".join(result.output.split())


@pytest.mark.parametrize("verb", [verb for verb, _ in _verbs_taking("savepoint_root")])
def test_a_savepoint_dir_no_backend_serves_is_refused_naming_the_flag(verb: str, tmp_path):
    result = CliRunner().invoke(main, [*verb.split(), "x", "--storage", tmp_path.as_uri(),
                                       "--savepoint-dir", "gs://bucket/prefix"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--savepoint-dir': unsupported storage scheme 'gs'" in " ".join(result.output.split())


def test_every_visible_option_says_what_it_does_in_help():
    """A user reading ``--help`` found options listed with nothing beside them."""
    def every(group: click.Group, path: str = "sluice") -> list[tuple[str, click.Command]]:  # groups too
        found: list[tuple[str, click.Command]] = [(path, group)]
        for name, command in sorted(group.commands.items()):
            where = f"{path} {name}"
            found += every(command, where) if isinstance(command, click.Group) else [(where, command)]
        return found

    silent = [(verb, "/".join(p.opts)) for verb, command in every(main) for p in command.params
              if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip()]
    assert silent == [], f"options without help text: {silent}"
