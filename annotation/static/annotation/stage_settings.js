/* On every admin page (admin/base_site.html). A stage setting that only one stage reads sits in a
   fieldset of class `for-stage-<stage>`: it is shown only while its form's stage is that stage (a
   family's page lists four stages; three of them would show verification's settings they ignore).
   A group holding an error is always shown, so a refused value is never hidden from its reader. */
(function () {
  "use strict";
  var PREFIX = "for-stage-";

  function stageOf(form) {
    var select = form.querySelector("select[name$='stage']");
    if (select) { return select.value; }
    var hidden = form.querySelector("input[name$='-stage'], input[name='stage']");
    return hidden ? hidden.value : "";
  }

  function show(form) {
    var stage = stageOf(form);
    form.querySelectorAll("fieldset[class*='" + PREFIX + "']").forEach(function (fieldset) {
      var wanted = Array.prototype.filter.call(fieldset.classList, function (name) {
        return name.indexOf(PREFIX) === 0;
      }).map(function (name) { return name.slice(PREFIX.length); });
      fieldset.hidden = wanted.indexOf(stage) === -1 && !fieldset.querySelector(".errorlist");
    });
  }

  function forms() {
    // A stacked inline's forms each hold a stage; a change form is one form.
    var inlines = document.querySelectorAll(".inline-related");
    return inlines.length ? Array.prototype.slice.call(inlines) : [document.getElementById("content-main")];
  }

  function showAll() {
    forms().forEach(function (form) { if (form) { show(form); } });
  }

  document.addEventListener("DOMContentLoaded", showAll);
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("select[name$='stage']")) {
      show(event.target.closest(".inline-related") || document.getElementById("content-main"));
    }
  });
  // A stage added with "Add another" arrives after the page loaded (Django's formset:added event).
  document.addEventListener("formset:added", showAll);
})();
