import pytest
pytestmark = pytest.mark.django_db(transaction=True)
V = {"schema": "1", "flow": "1", "policy": "1", "capability": "1"}

def test_probe(agent_client, support_user, tenant):
    rid = agent_client.post("/api/v1/runs/", {"task_type": "returns", "versions": V}, format="json").json()["id"]
    for path in ["/api/v1/runs/?ticket_id=%00", "/api/v1/runs/?order_id=a%00b", "/api/v1/runs/?status=%00", "/api/v1/runs/%00/"]:
        try:
            r = agent_client.get(path); print(path, r.status_code, r.content[:100])
        except BaseException as e:
            print("EXC", path, repr(e)[:200])
    try:
        r = agent_client.post(f"/api/v1/runs/{rid}/intents/a%00b/outcome/", {"ok": True}, format="json"); print("outcome nul", r.status_code, r.content[:100])
    except BaseException as e:
        print("EXC", repr(e)[:200])
    r = agent_client.post(f"/api/v1/runs/{rid}/intents/", {"tool": "t", "args": {}, "turn": 1}, format="multipart"); print("multipart", r.status_code, r.content[:100])
    r = agent_client.post(f"/api/v1/runs/{rid}/intents/", "x", content_type="text/plain"); print("text", r.status_code, r.content[:100])
    r = agent_client.post(f"/api/v1/runs/{rid}/intents/", "", content_type="application/json"); print("empty", r.status_code, r.content[:100])
    r = agent_client.post(f"/api/v1/runs/{rid}/intents/", "[1]", content_type="application/json"); print("list body", r.status_code, r.content[:100])
    r = agent_client.post(f"/api/v1/runs/{rid}/intents/", {"tool": "t", "args": {"x": float("nan")}, "turn": 1}, format="json"); print("nan", r.status_code, r.content[:100])
