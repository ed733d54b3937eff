"""Sampling requests as data: read, bounded, shown as plain text, answered."""

from __future__ import annotations

import pytest
from mcp_types._v2025_11_25 import CreateMessageRequestParams, CreateMessageResult

from hostapp.protocol import sampling as S
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError

PARAMS = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise <b>this</b>\nsecond line"}},
                 {"role": "assistant", "content": [{"type": "text", "text": "Which part?"}]},
                 {"role": "user", "content": {"type": "image", "data": "aGVsbG8h", "mimeType": "image/png"}}],
    "systemPrompt": "Be brief.", "maxTokens": 300, "temperature": 0.5, "stopSequences": ["END"],
    "includeContext": "thisServer",
    "modelPreferences": {"hints": [{"name": "claude"}, {"name": "small"}], "costPriority": 0.3},
}


def test_the_lab_and_the_example_params_are_what_the_official_schema_accepts():
    CreateMessageRequestParams.model_validate(PARAMS)  # the test's example is a real request


def test_a_request_is_read_with_every_part_a_person_must_see():
    request = S.describe_request(PARAMS)
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]
    assert request.messages[2].text == "[image, image/png, about 6 bytes]" and not request.only_text
    assert request.model_hints == ("claude", "small") and request.priorities == (("costPriority", 0.3),)
    text = S.plain_text(request, "srv", S.Limits(max_tokens=200))
    assert text.splitlines()[0] == "srv asks for a message from a language model."
    assert "at most 300 tokens (hostapp allows 200), temperature 0.5, stops at 'END'" in text
    assert "Model preferences: models like claude, small; cost 0.3" in text
    assert "hostapp does not include any" in text  # includeContext declined, and said
    assert "System prompt:\nBe brief." in text and "User:\nSummarise <b>this</b>\nsecond line" in text
    assert S.describe_request({**PARAMS, "messages": PARAMS["messages"][:1]}).summary == "Summarise <b>this</b>"


@pytest.mark.parametrize("change, said", [
    ({"messages": []}, "non-empty"),
    ({"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]}, "role"),
    ({"maxTokens": 0}, "maxTokens"),
    ({"maxTokens": True}, "maxTokens"),
    ({"temperature": "hot"}, "temperature"),
    ({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}, "tools"),
    ({"includeContext": "everything"}, "includeContext"),
    ({"messages": [{"role": "user", "content": "plain"}]}, "content block"),
])
def test_what_cannot_be_shown_is_refused_saying_why(change, said):
    with pytest.raises(RpcError) as caught:
        S.check_request({**PARAMS, **change}, S.Limits())
    assert caught.value.code == INVALID_PARAMS and said in caught.value.message


def test_a_request_over_the_size_bound_is_refused():
    with pytest.raises(RpcError, match="at most 20"):
        S.check_request(PARAMS, S.Limits(max_chars=20))


def test_the_persons_answer_becomes_a_create_message_result():
    result = S.result_of({"action": "accept", "reply": "Short."})
    CreateMessageResult.model_validate(result)
    assert result == {"role": "assistant", "content": {"type": "text", "text": "Short."},
                      "model": "written-by-person", "stopReason": "endTurn"}
    assert S.result_of({"action": "accept", "reply": "x", "model": "m1", "stopReason": "maxTokens"})["model"] == "m1"
    for refusal in ({"action": "decline"}, {"action": "cancel"}):
        with pytest.raises(RpcError) as caught:
            S.result_of(refusal)
        assert caught.value.code == S.USER_REJECTED
    with pytest.raises(ValueError, match="reply"):
        S.check_answer({"action": "accept", "content": {}})


def test_model_hints_choose_among_the_configured_names():
    assert S.choose_model(["claude", "small"], ["big-model", "Small-Model"]) == "Small-Model"
    assert S.choose_model(["gpt"], ["llama3", "qwen"]) == "llama3"  # no match: the default
    with pytest.raises(ValueError):
        S.choose_model([], [])


def test_the_chat_completion_body_and_its_answer():
    text_only = {**PARAMS, "messages": PARAMS["messages"][:2]}
    body = S.chat_completion_body(S.describe_request(text_only), "m", S.Limits(max_tokens=100))
    assert body == {"model": "m", "max_tokens": 100, "temperature": 0.5, "stop": ["END"],
                    "messages": [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Summarise <b>this</b>\nsecond line"},
                                 {"role": "assistant", "content": "Which part?"}]}
    with pytest.raises(ValueError, match="text only"):
        S.chat_completion_body(S.describe_request(PARAMS), "m", S.Limits())
    answer = {"model": "m-2024", "choices": [{"finish_reason": "length", "message": {"content": "Hi"}}]}
    assert S.read_chat_completion(answer, "m") == {"text": "Hi", "model": "m-2024", "stopReason": "maxTokens"}
    with pytest.raises(ValueError, match="no message text"):
        S.read_chat_completion({"choices": []}, "m")
