"""The static reading of command lines behind ``Bash``'s permissions: splitting compound
commands, spotting what cannot be read statically, read-only commands, dangerous patterns,
file targets and suggested prefixes."""

from __future__ import annotations

import pytest

from trioagent.tool._builtin import _shell


@pytest.mark.parametrize(
    ("command", "parts"),
    [
        ("a && b || c; d | e & f", ["a", "b", "c", "d", "e", "f"]),
        ("echo 'x && y' \"; z\"", ["echo 'x && y' \"; z\""]),
        ("make 2>&1 | tee log", ["make 2>&1", "tee log"]),
        ("cmd &> out", ["cmd &> out"]),
        ("a\nb", ["a", "b"]),
        ("echo 'open", None),
        ("echo a\\;b", ["echo a\\;b"]),
    ],
)
def test_split_commands(command: str, parts: list[str] | None) -> None:
    assert _shell.split_commands(command) == parts


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("echo $(date)", "command_substitution"),
        ('echo "$(date)"', "command_substitution"),
        ("echo `date`", "command_substitution"),
        ("echo ${HOME:-x}", "expansion"),
        ("diff <(ls a) <(ls b)", "process_substitution"),
        ("(cd x && make)", "subshell"),
        ("if true; then ls; fi", "if_statement"),
        ("while true; do ls; done", "while_statement"),
        ("f() { ls; }", "function_definition"),
        ("[[ -f x ]] && ls", "test_command"),
    ],
)
def test_injection_risks(command: str, kind: str) -> None:
    assert _shell.injection_risk(command) == (
        f"Command contains {kind} which cannot be statically analyzed"
    )


@pytest.mark.parametrize(
    "command", ["ls -la", "echo '$(not run)'", "echo $HOME", "git log --format='%H'"]
)
def test_statically_readable(command: str) -> None:
    assert _shell.injection_risk(command) is None


def test_unbalanced_quotes_are_a_risk() -> None:
    assert _shell.injection_risk("echo 'oops") == "Command parsing failed, cannot verify safety"


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("rm -rf /tmp/x", "rm -rf"),
        ("sudo rm x", "sudo rm"),
        ("dd if=a of=b", "dd"),
        ("git add .", None),
        ("chmod 777 f", "chmod 777"),
        ("echo > /dev/sda", "> /dev/"),
    ],
)
def test_dangerous_patterns(command: str, pattern: str | None) -> None:
    assert _shell.dangerous_pattern(command) == pattern


def test_file_paths_of_changing_commands_and_redirections() -> None:
    assert _shell.file_paths("rm -f a b && echo x > out.txt 2>>err.log") == [
        ("rm", "a"),
        ("rm", "b"),
        ("redirect", "out.txt"),
        ("redirect", "err.log"),
    ]
    assert _shell.file_paths("sed -i 's/a/b/' f.txt") == [("sed", "f.txt")]
    assert _shell.file_paths("make 2>&1") == []
    assert _shell.file_paths("ls a") == []


def test_sed_violations() -> None:
    assert _shell.sed_violation("sed -i s/a/b/ .env", [".env"]) == (
        "sed -i modifying dangerous file: .env"
    )
    assert _shell.sed_violation("sed 's/a/b/w out' f", []) is not None
    assert _shell.sed_violation("sed -n 1p f", [".env"]) is None


def test_command_prefixes() -> None:
    assert _shell.command_prefixes("npm run build && git commit -m x") == ["npm run", "git commit"]
    assert _shell.command_prefixes("ls -la; make") == []
    assert _shell.command_prefixes("SECRET=1 npm test") == []
    assert _shell.command_prefixes("NODE_ENV=ci npm test") == ["npm test"]
