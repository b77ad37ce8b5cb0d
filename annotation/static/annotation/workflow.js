// The workflow page keeps itself current: it polls its status (JSON) and updates the counts and
// the jobs' progress bars; when the next action changes, it reloads so the button is right.
(function () {
  "use strict";
  var root = document.getElementById("workflow");
  if (!root) { return; }
  var url = root.dataset.statusUrl;
  var STATE_TEXT = { done: "done", active: "under way", todo: "to do" };

  function refresh() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (status) {
        if (!status) { return; }
        var jobKeys = Array.prototype.map.call(root.querySelectorAll("[data-job]"),
          function (el) { return el.dataset.job; }).join(",");
        if (status.next.key !== root.dataset.nextKey ||
            status.jobs.map(function (job) { return job.key; }).join(",") !== jobKeys) {
          window.location.reload();
          return;
        }
        status.steps.forEach(function (step) {
          var item = root.querySelector('[data-step="' + step.key + '"]');
          if (!item) { return; }
          item.className = "workflow-step state-" + step.state;
          item.querySelector(".workflow-state").textContent = STATE_TEXT[step.state] || "to do";
          item.querySelector(".workflow-counts").textContent = step.counts;
        });
        status.jobs.forEach(function (job) {
          var el = root.querySelector('[data-job="' + job.key + '"]');
          if (!el) { return; }
          el.querySelector("progress").value = job.percent;
          el.querySelector(".workflow-job-status").textContent =
            job.status + (job.total ? ", " + job.done + " of " + job.total : "");
        });
      })
      .catch(function () { /* a missed poll is retried at the next tick */ });
  }
  window.setInterval(refresh, 3000);
}());
