"""The agent demo's Python step (examples/agent_executor.py): its logic, without a host."""

from __future__ import annotations

import json

import agent_executor
import agent_pb2
import pytest

import tether_plugin


def test_the_most_frequent_words_come_first_with_their_counts():
    outputs, message = agent_executor.word_stats({"top": 2}, {"text": "B a b, c b A"})
    assert outputs == {"top": [{"word": "b", "count": 3}, {"word": "a", "count": 2}], "distinct": 3}
    assert message == "3 distinct words"


def test_params_override_the_previous_steps_outputs():
    outputs, _ = agent_executor.word_stats({"text": "x"}, {"text": "y y"})
    assert outputs["top"] == [{"word": "x", "count": 1}]


@pytest.mark.parametrize("params", [{}, {"text": 3}, {"text": "a", "top": 0}, {"text": "a", "top": True}])
def test_bad_params_are_value_errors(params):
    with pytest.raises(ValueError):
        agent_executor.word_stats(params, {})


def test_a_bad_step_is_a_failed_phase_not_a_grpc_error():
    request = agent_pb2.ExecuteRequest(step="s", params_json="[1]", input_json="")
    response = agent_executor.WordStats(tether_plugin.GRPCBroker()).Execute(request, context=None)
    assert response.phase == agent_pb2.PHASE_FAILED
    assert "params_json must be a JSON object" in response.message
    assert json.loads(response.outputs_json) == {}
