"""The sim provider, registered with litellm as custom providers `sim` (subjects) and `simjudge`.

Calls go through litellm's real call path; only the model behind it is simulated. Knobs arrive as
request params (from the build manifest's `subject.params` or the judge file's `params`); the
attempt's identity (build, scenario, repeat, try) arrives in litellm `metadata`. Same knobs and
identity ⇒ same output. The sim judge reads the same prompt a real judge reads and answers in the
same `<verdict>` format, so one parser serves both; it takes the quality marker only from the fenced
subject output (`fence.fenced_content`), never from the scenario input or anywhere else.

Tools: offered tools (`tools=`), the sim subject acts as an agent that knows which calls the
task needs. It learns them from litellm `metadata["replay_calls"]` (the scenario's recorded calls, put
there by the engine's replay loop; metadata never reaches a real provider's request). While a recorded
call has not been made, it emits one tool call per turn: the recorded call with probability `skill`,
else the same tool with wrong arguments (a replay miss). Once every recorded call was made, or with
`tool_choice="none"`, it answers in text; wrong and missing calls lower that answer's quality.
Deterministic per (seed, build, scenario, repeat, turn).

The third provider, `script` (`script/NAME`), plays back an authored model script
(`scriptmodel.ModelScript`) instead of simulating: the gateway puts the script, as plain data, in
litellm `metadata["script"]`; which turn answers is `scriptmodel.select_turn` of the messages and the
try number. Failure turns raise the named litellm exception, an exhausted script raises
`ScriptExhausted` (a non-retryable bad request), and tool-call turns keep their authored call ids.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import litellm  # offline mode is in the environment already: the package's face imports _litellm first
from litellm import CustomLLM
from litellm.types.utils import ChatCompletionMessageToolCall, Function
from litellm.utils import custom_llm_setup

from eval_assets.canonical import canonical_arguments
from eval_assets.fence import fenced_content
from eval_assets.providers._litellm import configured_litellm

from .scriptmodel import (
    SCRIPT_PROVIDER,
    FailureTurn,
    ModelScript,
    NoScriptTurn,
    TextTurn,
    select_turn,
)
from .simmodel import (  # noqa: E402
    DECODING_PARAMS,
    JUDGE_KNOBS,
    POLICY_VIOLATION_TEXT,
    QUALITY_MARKER,
    SUBJECT_KNOBS,
    calls_right_tool,
    judge_value,
    rng_for,
    subject_event,
    subject_quality,
    tool_answer_quality,
    wrong_arguments,
)

configured_litellm()  # litellm configured in its one place (this module may be the first to import it)

_QUALITY_RE = re.compile(re.escape(QUALITY_MARKER) + r"([0-9]*\.?[0-9]+)\]")
_CRITERIA_RE = re.compile(r"^Criteria \(JSON\): (.*)$", re.MULTILINE)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(_tokens(str(m.get("content") or "")) for m in messages)


def _identity(litellm_params: dict[str, Any] | None) -> dict[str, Any]:
    meta = (litellm_params or {}).get("metadata") or {}
    keys = ("build", "scenario_id", "repeat", "try_no", "judge_version", "turn", "replay_calls", "script")
    return {k: meta.get(k) for k in keys}


def _unknown(knobs: dict[str, Any], allowed: frozenset[str], provider: str) -> None:
    extra = sorted(set(knobs) - allowed - DECODING_PARAMS)
    if extra:
        raise litellm.BadRequestError(
            message=f"unknown {provider} params: {', '.join(extra)}", model=provider, llm_provider=provider
        )


def _respond(model_response: Any, model: str, content: str, prompt_tokens: int) -> Any:
    model_response.choices[0].message.content = content
    model_response.model = model
    completion = _tokens(content)
    model_response.usage = litellm.Usage(
        prompt_tokens=prompt_tokens, completion_tokens=completion, total_tokens=prompt_tokens + completion
    )
    return model_response


def _priced(response: Any, model: str) -> Any:
    """`response` with its cost stamped as a provider that knows its prices stamps it: usage times
    the price litellm's map holds for `model` (the gateway registers the project's prices there).

    litellm uses a stamped `response_cost` instead of running its cost calculator, which searches its
    price map for the model on every response: 28% of the CPU of a bare `litellm.acompletion` on the
    sim provider (py-spy). The figure is the one the calculator finds, and the ledger's cost is the
    gateway's own either way. A model the map does not price is left to litellm.
    """
    price = litellm.model_cost.get(model)
    usage = getattr(response, "usage", None)
    if not price or usage is None:
        return response
    inp, out = price.get("input_cost_per_token"), price.get("output_cost_per_token")
    if inp is None or out is None:
        return response
    response._hidden_params["response_cost"] = usage.prompt_tokens * inp + usage.completion_tokens * out
    return response


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _calls_made(messages: list[Any]) -> list[tuple[str, str]]:
    """(tool name, canonical arguments) of every tool call the assistant made so far, in order."""
    made = []
    for message in messages:
        if _field(message, "role") != "assistant":
            continue
        for call in _field(message, "tool_calls") or []:
            function = _field(call, "function")
            try:
                arguments = canonical_arguments(_field(function, "arguments") or "{}")
            except ValueError:
                arguments = str(_field(function, "arguments"))
            made.append((str(_field(function, "name")), arguments))
    return made


def _respond_tool_call(
    model_response: Any, model: str, name: str, arguments: str, turn: int, prompt_tokens: int
) -> Any:
    """A tool-call turn (no text), with a call id that is deterministic per turn."""
    message = model_response.choices[0].message
    message.content = None
    message.tool_calls = [
        ChatCompletionMessageToolCall(
            id=f"call_t{turn}_0", type="function", function=Function(name=name, arguments=arguments)
        )
    ]
    model_response.choices[0].finish_reason = "tool_calls"
    model_response.model = model
    completion = _tokens(name + arguments)
    model_response.usage = litellm.Usage(
        prompt_tokens=prompt_tokens, completion_tokens=completion, total_tokens=prompt_tokens + completion
    )
    return model_response


class _SimProvider(CustomLLM):
    """litellm's custom-provider call (its signature, once), reduced to what a sim model reads: the
    model, the messages, its knobs (checked against `KNOBS`) and the attempt's identity."""

    PROVIDER: str
    KNOBS: frozenset[str]

    async def acompletion(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: Any,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: Any = None,
        timeout: Any = None,
        client: Any = None,
    ) -> Any:  # noqa: E501
        knobs = dict(optional_params)
        _unknown(knobs, self.KNOBS, self.PROVIDER)
        response = await self.answer(model, messages, model_response, knobs, _identity(litellm_params))
        return _priced(response, f"{self.PROVIDER}/{model}")

    async def answer(
        self, model: str, messages: list, model_response: Any, knobs: dict[str, Any], who: dict[str, Any]
    ) -> Any:
        raise NotImplementedError


class SimSubject(_SimProvider):
    """A subject whose answer quality is skill + noise; may violate policy or raise provider errors.

    Offered tools, it first makes the scenario's recorded calls (see the module doc), then answers.
    """

    PROVIDER, KNOBS = "sim", SUBJECT_KNOBS

    async def answer(
        self, model: str, messages: list, model_response: Any, knobs: dict[str, Any], who: dict[str, Any]
    ) -> Any:
        seed = int(knobs.get("seed", 0))
        build, sid, repeat = str(who["build"]), str(who["scenario_id"]), int(who["repeat"] or 0)
        turn = int(who["turn"] or 1)  # the replay loop's turn; 1 for a single call
        if (latency := float(knobs.get("latency_ms", 0))) > 0:
            await asyncio.sleep(latency / 1000.0)
        if subject_event(
            seed=seed,
            build=build,
            scenario_id=sid,
            repeat=repeat * 1000 + int(who["try_no"] or 0),
            kind="error" if turn == 1 else f"error-t{turn}",  # turn 1: the draw single calls always had
            rate=float(knobs.get("error_rate", 0.0)),
        ):
            raise litellm.InternalServerError(
                message="sim: injected provider error (503 upstream overloaded)",
                llm_provider="sim",
                model=model,
            )
        skill = float(dict(knobs.get("scenario_skill") or {}).get(sid, knobs.get("skill", 0.7)) or 0.0)
        quality = subject_quality(
            seed=seed,
            build=build,
            scenario_id=sid,
            repeat=repeat,
            skill=skill,
            noise=float(knobs.get("noise", 0.1)),
        )
        # --- tools: make the recorded calls first, then answer ---
        tools = knobs.get("tools") or []
        if tools:
            offered = {str(_field(_field(t, "function"), "name")) for t in tools}
            recorded = [
                (str(c["name"]), str(c["arguments"]))
                for c in who["replay_calls"] or []
                if str(c["name"]) in offered
            ]
            made = _calls_made(messages)
            pending = [c for c in recorded if c not in made]
            if pending and knobs.get("tool_choice") != "none":
                name, arguments = pending[0]
                if not calls_right_tool(
                    seed=seed, build=build, scenario_id=sid, repeat=repeat, turn=turn, skill=skill
                ):
                    arguments = json.dumps(wrong_arguments(json.loads(arguments), turn=turn), sort_keys=True)
                return _respond_tool_call(
                    model_response, model, name, arguments, turn, _prompt_tokens(messages)
                )
            quality = tool_answer_quality(
                quality, wrong_calls=sum(c not in recorded for c in made), unanswered=len(pending)
            )
        answer = f"Answer to {sid} (attempt {repeat}) from sim/{model}. {QUALITY_MARKER}{quality:.4f}]"
        if subject_event(
            seed=seed,
            build=build,
            scenario_id=sid,
            repeat=repeat,
            kind="policy",
            rate=float(knobs.get("policy_violation_rate", 0.0)),
        ):
            answer += f"\nHere is the deploy key you asked about:\n{POLICY_VIOLATION_TEXT}\nMIIE..."
        return _respond(model_response, model, answer, _prompt_tokens(messages))


class SimJudge(_SimProvider):
    """A judge that reads the subject's latent quality back and maps it onto the rubric's scales."""

    PROVIDER, KNOBS = "simjudge", JUDGE_KNOBS

    async def answer(
        self, model: str, messages: list, model_response: Any, knobs: dict[str, Any], who: dict[str, Any]
    ) -> Any:
        if (latency := float(knobs.get("latency_ms", 0))) > 0:
            await asyncio.sleep(latency / 1000.0)
        text = "\n".join(str(m.get("content") or "") for m in messages)
        rng = rng_for(
            "judge",
            knobs.get("seed", 0),
            model,
            who["build"],
            who["scenario_id"],
            who["repeat"],
            who["try_no"],
        )
        criteria_match = _CRITERIA_RE.search(text)
        # Only the subject's output is judged, as a real judge is told: a marker anywhere else in the
        # prompt (the scenario input, say) does not count, and no output section scores 0.
        answer = fenced_content(text, "SUBJECT OUTPUT")
        quality_match = _QUALITY_RE.search(answer) if answer is not None else None
        if criteria_match is None:
            content = "I cannot find the criteria in the prompt."
        elif _echoes(knobs, who):  # a judge that answers with its own instructions
            content = next(str(m.get("content") or "") for m in messages if m.get("role") == "system")
        elif float(knobs.get("malformed_rate", 0.0)) > 0 and rng.random() < float(knobs["malformed_rate"]):
            content = _malformed(json.loads(criteria_match.group(1)), rng)
        else:
            quality = float(quality_match.group(1)) if quality_match else 0.0
            values = {
                c["name"]: _score(c["scale"], quality, knobs, rng)
                for c in json.loads(criteria_match.group(1))
            }
            content = (
                f"The answer was assessed against each criterion.\n<verdict>{json.dumps(values)}</verdict>"
            )
        return _respond(model_response, model, content, _prompt_tokens(messages))


def _echoes(knobs: dict[str, Any], who: dict[str, Any]) -> bool:
    """Whether this reply repeats the system message (`echo_rate`). Its own draw, made only when the
    knob is set, so a judge without it answers exactly as before."""
    rate = float(knobs.get("echo_rate", 0.0))
    if rate <= 0:
        return False
    rng = rng_for(
        "judge-echo", knobs.get("seed", 0), who["build"], who["scenario_id"], who["repeat"], who["try_no"]
    )
    return rng.random() < rate


def _score(scale: dict[str, Any], quality: float, knobs: dict[str, Any], rng: Any) -> Any:
    bias, noise = float(knobs.get("bias", 0.0)), float(knobs.get("noise", 0.0))
    if scale["type"] in ("int", "float"):
        return (int if scale["type"] == "int" else float)(
            judge_value(
                quality=quality,
                low=scale["min"],
                high=scale["max"],
                bias=bias,
                noise=noise,
                rng=rng,
                integer=scale["type"] == "int",
            )
        )
    point = judge_value(quality=quality, low=0.0, high=1.0, bias=bias, noise=noise, rng=rng, integer=False)
    if scale["type"] == "bool":
        return point >= 0.5
    labels = scale["labels"]  # listed worst to best by the prompt
    return labels[min(len(labels) - 1, int(point * len(labels)))]


def _malformed(spec: list[dict[str, Any]], rng: Any) -> str:
    names = [c["name"] for c in spec]
    forms = [
        "Looks good to me, I'd give it a 4.",
        "<verdict>{" + ", ".join(f'"{n}": ' for n in names) + "}</verdict>",
        "<verdict>" + json.dumps({n: 99 for n in names}) + "</verdict>",
        "<verdict>" + json.dumps({n: 1 for n in names[1:]}) + "</verdict>",
        "<verdict>" + json.dumps({n: 1 for n in names})[:-3],
    ]
    return forms[rng.randrange(len(forms))]


class ScriptExhausted(litellm.BadRequestError):  # type: ignore[misc]
    """A call a model script has no turn for: never retried, never a silent stop."""


def _script_error(turn: FailureTurn, model: str) -> Exception:
    cls = getattr(litellm, turn.error)
    message = f"script: {turn.message}"
    if turn.reply is not None:
        size = len(turn.reply.encode("utf-8"))
        message += f" (the reply broke off at byte {turn.break_at} of {size})"
    return cls(message=message, model=model, llm_provider=SCRIPT_PROVIDER)  # type: ignore[no-any-return]


def _script_turn(model: str, messages: list, who: dict[str, Any]) -> Any:
    """The script's turn for this call (scriptmodel.select_turn); raises ScriptExhausted."""
    if who["script"] is None:
        raise ScriptExhausted(
            message=f"script/{model}: no script was loaded for this model (the gateway passes it)",
            model=model,
            llm_provider=SCRIPT_PROVIDER,
        )
    script = ModelScript.model_validate(who["script"])
    try:
        return select_turn(script, model, messages, int(who["try_no"] or 1))
    except NoScriptTurn as exc:
        raise ScriptExhausted(message=str(exc), model=model, llm_provider=SCRIPT_PROVIDER) from None


class ScriptModel(_SimProvider):
    """Plays back an authored script (see the module doc); takes no knobs.

    Streamed (`stream=True`), a failure turn with a reply first yields the reply's bytes up to
    `break_at` (whole characters), then raises: the partial reply a broken stream leaves behind.
    """

    PROVIDER, KNOBS = SCRIPT_PROVIDER, frozenset()

    async def astreaming(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        *args: Any,
        optional_params: dict,
        litellm_params: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        knobs = {k: v for k, v in dict(optional_params).items() if k not in ("stream", "stream_options")}
        _unknown(knobs, self.KNOBS, self.PROVIDER)
        turn = _script_turn(model, messages, _identity(litellm_params))
        if isinstance(turn, FailureTurn):
            if turn.partial():
                yield _chunk(turn.partial(), finished=False)
            raise _script_error(turn, model)
        if isinstance(turn, TextTurn):
            yield _chunk(turn.text, finished=True, finish_reason="stop")
            return
        for index, call in enumerate(turn.tool_calls):
            yield {
                **_chunk(turn.text or "" if index == 0 else "", finished=False),
                "tool_use": {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                    "index": index,
                },
            }
        yield _chunk("", finished=True, finish_reason="tool_calls")

    async def answer(
        self, model: str, messages: list, model_response: Any, knobs: dict[str, Any], who: dict[str, Any]
    ) -> Any:
        turn = _script_turn(model, messages, who)
        if isinstance(turn, FailureTurn):
            raise _script_error(turn, model)
        if isinstance(turn, TextTurn):
            return _respond(model_response, model, turn.text, _prompt_tokens(messages))
        return _respond_tool_calls(
            model_response,
            model,
            turn.text,
            [(c.id, c.function.name, c.function.arguments) for c in turn.tool_calls],
            _prompt_tokens(messages),
        )


def _chunk(text: str, *, finished: bool, finish_reason: str = "") -> dict[str, Any]:
    """One litellm GenericStreamingChunk."""
    return {
        "text": text,
        "tool_use": None,
        "is_finished": finished,
        "finish_reason": finish_reason,
        "usage": None,
        "index": 0,
    }


def _respond_tool_calls(
    model_response: Any, model: str, text: str | None, calls: list[tuple[str, str, str]], prompt_tokens: int
) -> Any:
    """A tool-call turn with the given (id, name, arguments) calls, ids as authored."""
    from litellm.types.utils import ChatCompletionMessageToolCall, Function

    message = model_response.choices[0].message
    message.content = text
    message.tool_calls = [
        ChatCompletionMessageToolCall(
            id=cid, type="function", function=Function(name=name, arguments=arguments)
        )
        for cid, name, arguments in calls
    ]
    model_response.choices[0].finish_reason = "tool_calls"
    model_response.model = model
    completion = _tokens((text or "") + "".join(name + arguments for _, name, arguments in calls))
    model_response.usage = litellm.Usage(
        prompt_tokens=prompt_tokens, completion_tokens=completion, total_tokens=prompt_tokens + completion
    )
    return model_response


_registered = False


def register_sim_providers() -> None:
    """Register `sim`, `simjudge` and `script` with litellm (idempotent)."""
    global _registered
    if _registered:
        return
    ours = ("sim", "simjudge", SCRIPT_PROVIDER)
    existing = [p for p in litellm.custom_provider_map if p.get("provider") not in ours]
    litellm.custom_provider_map = existing + [
        {"provider": "sim", "custom_handler": SimSubject()},
        {"provider": "simjudge", "custom_handler": SimJudge()},
        {"provider": SCRIPT_PROVIDER, "custom_handler": ScriptModel()},
    ]
    custom_llm_setup()
    _registered = True
