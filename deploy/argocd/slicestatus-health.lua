-- Argo CD health check for slicectl's SliceStatus objects (slicectl.dev/v1alpha1).
-- It goes in Argo CD's own argocd-cm ConfigMap (Argo CD's namespace, not slicectl's),
-- under the key resource.customizations.health.slicectl.dev_SliceStatus: the
-- argocd-cm snippet in docs/status-objects.md must be the same text as the
-- script below this header; tests/status_object.rs fails when they differ, and runs
-- this script as Argo CD does (gopher-lua; tests/kstatus) on objects slicectl wrote.
-- It uses only Lua's base library: argocd-cm scripts run without string, math or os
-- unless resource.customizations.useOpenLibs.slicectl.dev_SliceStatus is "true".

-- kstatus's order (as Flux reads these objects): a status not written yet, or
-- written for an older generation, is Progressing; then Stalled=True is Degraded,
-- Reconciling=True Progressing, Ready=True Healthy, anything else Progressing.
local waiting = "Waiting for slicectl to write the status"
local st = obj.status or {}
local observed, generation = st.observedGeneration, obj.metadata.generation
if observed == nil or observed < 0 then
  return {status = "Progressing", message = waiting}
end
if generation ~= nil and observed ~= generation then
  return {status = "Progressing", message = "SliceStatus generation is " .. generation .. ", but latest observed generation is " .. observed}
end
local cond = {}
for _, c in ipairs(st.conditions or {}) do
  if c.type ~= nil then cond[c.type] = c end
end
if cond.Stalled ~= nil and cond.Stalled.status == "True" then
  return {status = "Degraded", message = cond.Stalled.message}
end
if cond.Reconciling ~= nil and cond.Reconciling.status == "True" then
  return {status = "Progressing", message = cond.Reconciling.message}
end
if cond.Ready ~= nil and cond.Ready.status == "True" then
  return {status = "Healthy", message = cond.Ready.message}
end
if cond.Ready ~= nil then
  return {status = "Progressing", message = cond.Ready.message}
end
return {status = "Progressing", message = waiting}
