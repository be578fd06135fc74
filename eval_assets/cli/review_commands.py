"""`evaltrack review fill | next | submit | release | list`: the human review queue (docs/review.md).

A refusal (nothing open, taken, not your claim, a score that does not validate) stores nothing and
says why on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from eval_assets import exit_codes
from eval_assets.cli.arguments import Commands, command, format_option, group, id_arg
from eval_assets.cli.common import home_of, missing_home, print_problems, project_of
from eval_assets.config import ConfigError

if TYPE_CHECKING:
    from eval_assets.capability.track import Track

REFUSED = "refused, the reason on stderr (nothing stored)"


def register(sub: Commands) -> None:
    review = group(sub, "review", help="the human review queue (docs/review.md)")
    fill = command(
        review,
        "fill",
        help="queue failed verdicts, bridge disagreements and the seeded sample",
        run=cmd_review_fill,
        exits={exit_codes.OK: "filled", exit_codes.REFUSED: REFUSED},
    )
    fill.add_argument("--build", type=id_arg, help="one build (default: every registered build)")
    nxt = command(
        review,
        "next",
        help="claim one item exclusively and show it",
        run=cmd_review_next,
        exits={exit_codes.OK: "claimed and shown", exit_codes.REFUSED: "nothing open, or the item is taken"},
    )
    nxt.add_argument("--reviewer", required=True, help="your name, as the queue records it")
    nxt.add_argument("--item", help="claim this item instead of the next open one")
    format_option(nxt, "text", "json")
    submit = command(
        review,
        "submit",
        help="store your scores for a claimed item (validated; all or nothing)",
        run=cmd_review_submit,
        exits={exit_codes.OK: "stored (or already stored)", exit_codes.REFUSED: REFUSED},
    )
    submit.add_argument("item", help="the item you claimed (`review next`)")
    submit.add_argument("--reviewer", required=True, help="your name, as you claimed it")
    submit.add_argument(
        "--scores",
        required=True,
        nargs="+",
        help="NAME=VALUE ... or one JSON object, e.g. '{\"accuracy\": 4}'",
    )
    release = command(
        review,
        "release",
        help="return your claimed item to the pool",
        run=cmd_review_release,
        exits={exit_codes.OK: "released", exit_codes.REFUSED: "refused: not your claim, or no such item"},
    )
    release.add_argument("item", help="the item you claimed (`review next`)")
    release.add_argument("--reviewer", required=True, help="your name, as you claimed it")
    listing = command(
        review,
        "list",
        help="the queue's items and their state",
        run=cmd_review_list,
        exits={exit_codes.OK: "listed", exit_codes.REFUSED: "the project or the journal cannot be read"},
    )
    listing.add_argument("--build", type=id_arg, help="one build's items (default: every build's)")


def _track(args: argparse.Namespace) -> Track:
    from eval_assets.capability.track import Track

    return Track(project_of(args), home_of(args))


def _refused(message: str) -> int:
    print(message, file=sys.stderr)
    return exit_codes.REFUSED


def _show(shown: dict[str, Any]) -> str:
    from eval_assets.review import iso

    lines = [
        f"item {shown['item_id']} ({shown['reason']}): {shown['build']} / {shown['scenario_id']} / "
        f"repeat {shown['repeat']}, judge version {shown['judge_version']} (rubric {shown['rubric']})",
        f"your claim lapses at {iso(shown['expires_at'])}",
        "",
        "== scenario input ==",
        *(f"[{m['role']}] {m['content']}" for m in shown["input"]),
        "",
        "== subject output ==",
        shown["output"] if shown["output"] is not None else "(no output stored)",
        "",
        "== criteria (score every one) ==",
    ]
    for c in shown["criteria"]:
        scale = c["scale"]
        if scale["type"] in ("int", "float"):
            what = f"{'integer' if scale['type'] == 'int' else 'number'} {scale['min']}..{scale['max']}"
        elif scale["type"] == "bool":
            what = "true or false"
        else:
            what = "one of " + ", ".join(scale["labels"]) + " (worst to best)"
        lines.append(f"- {c['name']} ({what}): {c['description']}")
    names = " ".join(f"{c['name']}=..." for c in shown["criteria"])
    lines += ["", f"submit: evaltrack review submit {shown['item_id']} --reviewer NAME --scores {names}"]
    return "\n".join(lines)


def cmd_review_fill(args: argparse.Namespace) -> int:
    from eval_assets.review import fill, open_store
    from eval_assets.spend import JournalError

    try:
        track = _track(args)
        builds = [args.build] if args.build else track.registered_builds()
        if args.build and args.build not in track.registered_builds():
            return _refused(f"unknown build {args.build!r}: register it with `evaltrack build add`")
        with open_store(track) as store:
            summary = fill(track, store, builds)
    except ConfigError as exc:
        return print_problems(exc)
    except JournalError as exc:
        return _refused(str(exc))
    reasons = ", ".join(f"{n} {r}" for r, n in sorted(summary.by_reason.items())) or "nothing"
    print(
        f"review fill over {len(summary.builds)} build(s): {summary.proposed} proposed ({reasons}); "
        f"{summary.added} new item(s) queued"
    )
    return exit_codes.OK


def cmd_review_next(args: argparse.Namespace) -> int:
    from eval_assets.review import ReviewError, export, open_store, present
    from eval_assets.spend import JournalError

    try:
        track = _track(args)
        with open_store(track) as store:
            outcome = store.claim(args.item, args.reviewer) if args.item else store.claim_next(args.reviewer)
            if outcome.status in ("claimed", "held") and outcome.item is not None:
                export(track, store, outcome.item.build)
                shown = present(track, outcome.item)
    except ConfigError as exc:
        return print_problems(exc)
    except (ReviewError, JournalError) as exc:
        return _refused(str(exc))
    if outcome.status not in ("claimed", "held"):
        return _refused(outcome.message)
    if args.format == "json":
        print(json.dumps({"status": outcome.status, **shown}, indent=2))
    else:
        print(outcome.message)
        print(_show(shown))
    return exit_codes.OK


def cmd_review_submit(args: argparse.Namespace) -> int:
    from eval_assets.human_scores import HumanScoreError
    from eval_assets.review import ReviewError, open_store, parse_scores, submit
    from eval_assets.spend import JournalError

    try:
        track = _track(args)
        scores = parse_scores(args.scores)
        with open_store(track) as store:
            result = submit(track, store, args.item, args.reviewer, scores)
    except ConfigError as exc:
        return print_problems(exc)
    except HumanScoreError as exc:
        print(exc, file=sys.stderr)
        return _refused("refused: nothing stored; the item stays claimed by you")
    except (ReviewError, JournalError) as exc:
        return _refused(str(exc))
    if result.already:
        print(f"item {args.item}: already submitted as human score {result.score_id}; nothing changed")
    else:
        print(f"item {args.item} done: human score {result.score_id} stored in human_scores (source human)")
    return exit_codes.OK


def cmd_review_release(args: argparse.Namespace) -> int:
    from eval_assets.review import ReviewError, export, open_store
    from eval_assets.spend import JournalError

    try:
        track = _track(args)
        with open_store(track) as store:
            item = store.release(args.item, args.reviewer)
            export(track, store, item.build)
    except ConfigError as exc:
        return print_problems(exc)
    except (ReviewError, JournalError) as exc:
        return _refused(str(exc))
    print(f"item {args.item} released: open for any reviewer")
    return exit_codes.OK


def cmd_review_list(args: argparse.Namespace) -> int:
    from eval_assets.review import open_store
    from eval_assets.spend import JournalError

    try:
        project_of(args)
        if (why := missing_home(args)) is not None:
            print(f"{why}\n0 open, 0 claimed, 0 done")
            return exit_codes.OK
        track = _track(args)
        with open_store(track) as store:
            items = store.items(build=args.build)
            now = store.now()
    except ConfigError as exc:
        return print_problems(exc)
    except JournalError as exc:
        return _refused(str(exc))
    for i in items:
        state = i.state_at(now)
        who = i.claimed_by if state == "claimed" else i.done_by if state == "done" else ""
        print(
            f"{i.item_id}  {state:<7} {i.reason:<19} {i.build} {i.judge_version} {i.scenario_id}/{i.repeat} {who or ''}"
        )
    counts = {s: sum(1 for i in items if i.state_at(now) == s) for s in ("open", "claimed", "done")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return exit_codes.OK
