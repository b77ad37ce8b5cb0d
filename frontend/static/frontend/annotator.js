/* Annotator pages: drafts, active time, keyboard, images, and submission without losing work.
 * Plain JavaScript, no build step. Every feature keys off data-* attributes in the templates, so
 * a new stage page gets all of it by extending annotator/stage_page.html. Without JavaScript the form
 * still posts and the server answers with a page. */
(function () {
  "use strict";

  var configElement = document.getElementById("task-config");
  var config = configElement ? JSON.parse(configElement.textContent) : {};
  var form = document.querySelector("form[data-task-form]");
  var SKIP = { token: true, active_seconds: true };

  function storage() {
    try {
      var probe = "crowdbench:probe";
      window.localStorage.setItem(probe, "1");
      window.localStorage.removeItem(probe);
      return window.localStorage;
    } catch (error) {
      return null; // Blocked third-party storage: the page still works, without drafts.
    }
  }
  var store = storage();
  var draftKey = config.draftKey ? "crowdbench:draft:" + config.draftKey : "";

  function readDraft() {
    if (!store || !draftKey) { return null; }
    try { return JSON.parse(store.getItem(draftKey) || "null"); } catch (error) { return null; }
  }

  // --- active time: visible, focused, and some input in the last idleSeconds ---
  var active = 0;
  var lastInput = Date.now();
  var idleMs = (config.idleSeconds || 60) * 1000;
  var timerValue = document.querySelector("[data-timer-value]");
  function showTime() {
    if (!timerValue) { return; }
    var seconds = Math.floor(active);
    timerValue.textContent = Math.floor(seconds / 60) + ":" + String(seconds % 60).padStart(2, "0");
  }
  ["keydown", "pointerdown", "pointermove", "wheel", "scroll", "input", "touchstart"].forEach(function (name) {
    window.addEventListener(name, function () {
      lastInput = Date.now();
      // Warned, or lapsed: the worker is back, so the server hears it now rather than within a minute.
      if (lease.state === "held") { beatIfDue(); } else if (lease.state !== "gone") { beat(); }
    }, { passive: true, capture: true });
  });

  // --- the lease: a sign of life while the worker is active, so it lapses soon after they stop ---
  var beatMs = (config.heartbeatSeconds || 60) * 1000;
  var lastBeat = Date.now();
  var beating = false;
  function beat() {
    if (!config.heartbeatUrl || !form || submitting || beating) { return; }
    lastBeat = Date.now();
    beating = true;
    var sent = Date.now();
    var data = new FormData();
    data.set("token", form.elements.token.value);
    fetch(config.heartbeatUrl, { method: "POST", body: data, headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) { return response.json(); })
      .then(function (result) {
        if (result.ok) { leaseKept(result, sent); } else { leaseGone(result.error); }
      })
      .catch(function () { /* offline for a moment: the next beat tries again */ })
      .then(function () { beating = false; });
  }
  function beatIfDue() {
    // Back from a pause: the lease is renewed at once (taken again if it lapsed and is still free).
    if (config.heartbeatUrl && Date.now() - lastBeat > beatMs) { beat(); }
  }
  // --- the lease, told: a calm notice shortly before it lapses, and a plain one once it has ---
  // Counted down from the seconds the server gave (config.lease, each heartbeat's answer), from
  // when they were asked for, so a wrong clock on the worker's device changes nothing.
  var lease = { state: "held", deadline: 0, renewable: true, shown: "" };
  var leaseBox = document.querySelector("[data-lease-notice]");
  var warnMs = (config.leaseWarningSeconds || 120) * 1000;
  var againTimer = 0;
  function showLease(text, kind) {
    if (!leaseBox || text === lease.shown) { return; }
    lease.shown = text;
    leaseBox.textContent = "";
    if (!text) { return; }
    var line = document.createElement("p");
    line.className = "banner lease-" + kind;
    line.textContent = text;
    leaseBox.appendChild(line);
  }
  function inAbout(ms) {
    var minutes = Math.round(ms / 60000);
    return minutes < 1 ? "in less than a minute" : "in about " + minutes + (minutes === 1 ? " minute" : " minutes");
  }
  function drawLease() {
    if (lease.state === "gone" || !lease.deadline) { return; }
    var left = lease.deadline - Date.now();
    if (left <= 0) {
      lease.state = "lapsed";
      showLease("Your hold on this task has ended. You can still submit: your answer is saved only if " +
        "nobody else has taken it meanwhile. " + (store && draftKey ? "What you typed is kept in this browser as a draft." :
        "What you typed is still on this page; please keep it open."), "lapsed");
    } else if (left <= warnMs) {
      lease.state = "warned";
      showLease("Your hold on this task ends " + inAbout(left) + (lease.renewable ? "; keep working to keep it." :
        ". Please submit before then: after that your answer is saved only if nobody else has taken the task."), "warning");
    } else if (lease.state !== "held") {
      var back = lease.state === "lapsed";
      lease.state = "held";
      showLease(back ? "This task is yours again; your hold runs on while you work." : "", "held");
      window.clearTimeout(againTimer);
      if (back) { againTimer = window.setTimeout(function () { if (lease.state === "held") { showLease("", "held"); } }, 10000); }
    }
  }
  function leaseKept(terms, since) {
    lease.deadline = since + terms.expires_in * 1000;
    lease.renewable = terms.renewable;
    drawLease();
  }
  function leaseGone(message) {
    lease.state = "gone";
    showLease(message, "lapsed");
  }
  function setUpLeaseNotice() {
    if (!config.lease) { return; }
    leaseKept(config.lease, Date.now());
    window.setInterval(drawLease, 1000);
    document.addEventListener("visibilitychange", drawLease);
  }

  function setUpHeartbeat() {
    if (!config.heartbeatUrl) { return; }
    window.setInterval(function () {
      if (document.visibilityState === "visible" && Date.now() - lastInput < 2 * beatMs) { beat(); }
    }, beatMs);
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") { beatIfDue(); }
    });
  }

  // --- drafts: every typed value in localStorage, per assignment, until a successful submit ---
  function draftFields() {
    return Array.prototype.filter.call(form.elements, function (element) {
      return element.name && !SKIP[element.name] && element.type !== "file" &&
        element.type !== "submit" && element.type !== "button" && element.type !== "hidden";
    });
  }
  function saveDraft() {
    if (!store || !draftKey || !form || submitting) { return; }
    var values = {};
    var checked = [];
    draftFields().forEach(function (element) {
      if (element.type === "radio" || element.type === "checkbox") {
        if (element.checked) { checked.push(element.name + "=" + element.value); }
      } else if (element.value) {
        values[element.name] = element.value;
      }
    });
    try {
      store.setItem(draftKey, JSON.stringify({ values: values, checked: checked, active: active, savedAt: Date.now() }));
    } catch (error) { /* storage full: keep working */ }
  }
  function restoreDraft() {
    var draft = readDraft();
    if (!draft) { return false; }
    active = draft.active || 0;
    var restored = false;
    var slotIndexes = Object.keys(draft.values || {}).map(function (name) {
      var match = /^image-(\d+)-/.exec(name);
      return match ? Number(match[1]) : -1;
    });
    var needed = Math.max.apply(null, [-1].concat(slotIndexes)) + 1;
    while (slotCount() < needed && addSlot()) { /* make room for restored image slots */ }
    draftFields().forEach(function (element) {
      if (element.type === "radio" || element.type === "checkbox") {
        var group = form.querySelectorAll('[name="' + element.name + '"]:checked');
        if (!group.length && draft.checked.indexOf(element.name + "=" + element.value) !== -1) {
          element.checked = true; restored = true;
        }
      } else if (!element.value && draft.values[element.name]) {
        element.value = draft.values[element.name]; restored = true;
      }
    });
    return restored;
  }
  function clearDraft() { if (store && draftKey) { store.removeItem(draftKey); } }

  // --- conditional parts, counters, validity ---
  function syncConditions() {
    form.querySelectorAll("[data-show-when]").forEach(function (part) {
      var rule = part.getAttribute("data-show-when").split("=");
      var chosen = form.querySelector('[name="' + rule[0] + '"]:checked');
      var show = Boolean(chosen && chosen.value === rule[1]);
      part.hidden = !show;
      part.disabled = !show || Boolean(config.preview);
    });
  }
  function syncCounters() {
    form.querySelectorAll("[data-counter-for]").forEach(function (counter) {
      var field = document.getElementById(counter.getAttribute("data-counter-for"));
      var min = Number(field.getAttribute("data-minlength") || 0);
      var max = Number(field.getAttribute("data-maxlength") || 0);
      var length = field.value.trim().length;
      var note = max && length > max ? " · at most " + max.toLocaleString("en") + ": please shorten it" :
        min ? (length < min ? " · at least " + min : " · enough") : "";
      counter.textContent = length.toLocaleString("en") + " characters" + note;
      counter.classList.toggle("short", (length > 0 && length < min) || (max > 0 && length > max));
      counter.classList.toggle("enough", length >= min && min > 0 && !(max && length > max));
    });
  }
  function syncSlots() {
    var slots = form.querySelectorAll("[data-image-slot]");
    if (!slots.length) { return 0; }
    var filled = 0;
    slots.forEach(function (slot) {
      var file = slot.querySelector("[data-slot-file]");
      var url = slot.querySelector("[data-slot-url]");
      var used = Boolean((file && file.files.length) || (url && url.value.trim()));
      if (used) { filled += 1; }
      slot.querySelectorAll("[data-slot-required]").forEach(function (input) { input.required = used; });
    });
    return filled;
  }
  function labelOf(element) {
    var fieldset = element.closest("fieldset:not(.plain)");
    var legend = fieldset && fieldset.querySelector("legend");
    var label = element.id && form.querySelector('label[for="' + element.id + '"]');
    return (label ? label.textContent : legend ? legend.textContent : "").trim();
  }
  function validate() {
    form.querySelectorAll("[data-minlength], [data-maxlength]").forEach(function (field) {
      var length = field.value.trim().length;
      var short = !field.disabled && length < Number(field.getAttribute("data-minlength") || 0);
      var max = Number(field.getAttribute("data-maxlength") || 0);
      // Checked here rather than by the maxlength attribute, which would cut a paste short unseen.
      var long = !field.disabled && max > 0 && length > max;
      field.setCustomValidity(short ? field.getAttribute("data-too-short") || "Please write a little more." :
        long ? field.getAttribute("data-too-long") || "Please shorten this to " + max + " characters." : "");
    });
    var slotBox = form.querySelector("[data-image-slots]");
    if (slotBox) {
      var firstFile = slotBox.querySelector("[data-slot-file]");
      var min = Number(slotBox.getAttribute("data-min-images") || 1);
      firstFile.setCustomValidity(syncSlots() < min ? (min > 1 ? "Please add at least " + min + " images." : "Please add an image.") : "");
    }
    var invalid = form.querySelector(":invalid:not(fieldset)");
    if (!invalid) { return true; }
    // Our own messages say what is wrong; the browser's need the field's name in front.
    var where = invalid.validity.customError ? "" : labelOf(invalid);
    showError((where ? where + ": " : "") + invalid.validationMessage);
    invalid.focus();
    return false;
  }

  // --- submission: one at a time; a failure keeps every word and says why ---
  var submitting = false;
  var button = form && form.querySelector("[data-submit]");
  var statusBox = form && form.querySelector("[data-status]");
  var errorBox = form && form.querySelector("[data-error]");
  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = false;
  }
  function setBusy(busy, text) {
    submitting = busy;
    button.disabled = busy;
    statusBox.textContent = text || "";
  }
  function handBackToMturk(handback) {
    var post = document.createElement("form");
    post.method = "post";
    post.action = handback.action;
    Object.keys(handback.fields).forEach(function (name) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = handback.fields[name];
      post.appendChild(input);
    });
    document.body.appendChild(post);
    post.submit();
  }
  function onSubmit(event) {
    event.preventDefault();
    if (submitting || config.preview) { return; }
    errorBox.hidden = true;
    if (!validate()) { return; }
    var data = new FormData(form);
    data.set("active_seconds", String(Math.round(active)));
    setBusy(true, "Saving…");
    fetch(form.action, { method: "POST", body: data, headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        return response.json().catch(function () {
          return { ok: false, error: "The server could not save your answer (error " + response.status + "). Your text is still here; please try again." };
        });
      })
      .then(function (result) {
        if (!result.ok) {
          setBusy(false, "");
          showError(result.error || "Your answer was not saved. Your text is still here; please try again.");
          return;
        }
        clearDraft();
        statusBox.textContent = "Saved.";
        if (result.mturk) { handBackToMturk(result.mturk); } else if (result.next) { window.location.assign(result.next); }
      })
      .catch(function () {
        setBusy(false, "");
        showError("Could not reach the server. Your text is still here and saved in this browser; please try again.");
      });
  }
  function requestSubmit() {
    if (typeof form.requestSubmit === "function") { form.requestSubmit(button); } else { button.click(); }
  }

  // --- keyboard: number keys choose, Enter submits (Ctrl/Cmd+Enter inside text) ---
  function isTyping(target) {
    if (!target || !target.tagName) { return false; }
    if (target.isContentEditable || target.tagName === "TEXTAREA" || target.tagName === "SELECT") { return true; }
    return target.tagName === "INPUT" && !/^(radio|checkbox|button|submit|file)$/.test(target.type);
  }
  function onKey(event) {
    if (!form || config.preview || event.altKey || event.defaultPrevented) { return; }
    if (document.querySelector("dialog[open]")) { return; }
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      requestSubmit();
      return;
    }
    if (event.ctrlKey || event.metaKey || isTyping(event.target)) { return; }
    var onControl = event.target.closest && event.target.closest("button, a, summary");
    if (event.key === "Enter" && !onControl) {
      event.preventDefault();
      requestSubmit();
      return;
    }
    // Pages with several questions (pairwise criteria, a qualification test) group their choices:
    // the keys answer the question in focus (or the first unanswered one), then move to the next.
    var groups = keyGroups();
    var group = groups.length ? currentGroup(groups, event.target) : null;
    if (groups.length && !group) { return; }
    var choice = (group || form).querySelector('[data-shortcut="' + event.key + '"]');
    if (choice && !choice.disabled && choice.offsetParent !== null) {
      event.preventDefault();
      choice.click();
      choice.focus();
      if (group) { advance(groups, group); }
    }
  }
  function keyGroups() {
    return Array.prototype.filter.call(form.querySelectorAll("[data-key-group]"), function (group) {
      return !group.disabled && group.offsetParent !== null;
    });
  }
  function answered(group) { return Boolean(group.querySelector("input:checked")); }
  function currentGroup(groups, target) {
    var mine = target && target.closest && target.closest("[data-key-group]");
    if (mine && groups.indexOf(mine) !== -1) { return mine; }
    if (target && target.closest && target.closest("[data-task-form]")) { return null; }
    return groups.filter(function (group) { return !answered(group); })[0] || null;
  }
  function advance(groups, group) {
    var later = groups.slice(groups.indexOf(group) + 1);
    var next = later.filter(function (other) { return !answered(other); })[0] ||
      groups.filter(function (other) { return !answered(other); })[0];
    if (!next) { button.focus(); return; }
    var target = next.querySelector("input:checked") || next.querySelector("input, textarea");
    if (target) { target.focus(); next.scrollIntoView({ block: "nearest" }); }
  }

  // --- image slots (instruction generation): add one, preview what was chosen ---
  function slotCount() { return form ? form.querySelectorAll("[data-image-slot]").length : 0; }
  function addSlot() {
    var template = document.querySelector("template[data-slot-template]");
    var box = form && form.querySelector("[data-image-slots]");
    if (!template || !box || slotCount() >= Number(box.getAttribute("data-max-images"))) { return false; }
    var index = slotCount();
    var html = template.innerHTML.replace(/__i__/g, String(index)).replace(/__n__/g, String(index + 1));
    box.insertAdjacentHTML("beforeend", html);
    return true;
  }
  function allowedImageUrl(value) {
    try {
      var url = new URL(value);
      return url.protocol === "https:" && (config.allowedImageHosts || []).indexOf(url.hostname) !== -1;
    } catch (error) { return false; }
  }
  function previewSlot(slot) {
    var preview = slot.querySelector("[data-slot-preview]");
    var file = slot.querySelector("[data-slot-file]");
    var url = slot.querySelector("[data-slot-url]").value.trim();
    preview.textContent = "";
    var image = document.createElement("img");
    image.alt = "Preview of " + slot.querySelector("legend").textContent;
    if (file.files.length) {
      image.src = URL.createObjectURL(file.files[0]);
      preview.appendChild(image);
    } else if (url && allowedImageUrl(url)) {
      image.src = url;
      preview.appendChild(image);
    } else if (url) {
      var note = document.createElement("p");
      note.className = "hint";
      note.textContent = "No preview for links outside " + (config.allowedImageHosts || []).join(", ") + "; please check the link opens your image.";
      preview.appendChild(note);
    }
  }

  // --- images: click to see full size, click again to zoom ---
  function setUpLightbox() {
    var dialog = document.querySelector("[data-lightbox-dialog]");
    if (!dialog || typeof dialog.showModal !== "function") { return; }
    var image = dialog.querySelector("[data-lightbox-image]");
    var title = dialog.querySelector("[data-lightbox-title]");
    document.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest("a[data-lightbox]");
      if (!link || event.ctrlKey || event.metaKey || event.shiftKey) { return; }
      event.preventDefault();
      image.src = link.href;
      image.alt = link.getAttribute("aria-label").replace(": open full size", ", full size");
      title.textContent = image.alt;
      image.classList.remove("zoomed");
      dialog.showModal();
    });
    image.addEventListener("click", function () { image.classList.toggle("zoomed"); });
    dialog.addEventListener("click", function (event) { if (event.target === dialog) { dialog.close(); } });
  }

  function setUpTask() {
    form.noValidate = true; // our own messages, shown in the page rather than in a bubble
    var restored = restoreDraft();
    syncConditions();
    syncCounters();
    syncSlots();
    showTime();
    if (config.preview) { return; }
    var note = form.querySelector("[data-draft-note]");
    // Said only where there is text to lose: a page of choices alone has nothing typed.
    if (note && store && form.querySelector("textarea, input[type=text]")) {
      note.hidden = false;
      if (restored) { note.textContent = "Your earlier text was restored from this browser."; }
    }
    form.addEventListener("input", function () { syncCounters(); syncSlots(); saveDraft(); });
    // A browser showing the page again (the Back button) refills its form after this script ran,
    // firing no input event: count what it put back.
    window.addEventListener("pageshow", function () { syncConditions(); syncCounters(); syncSlots(); });
    form.addEventListener("change", function (event) {
      syncConditions();
      syncSlots();
      var slot = event.target.closest("[data-image-slot]");
      if (slot) { previewSlot(slot); }
      saveDraft();
    });
    form.addEventListener("submit", onSubmit);
    form.addEventListener("click", function (event) {
      if (event.target.closest("[data-add-slot]")) { addSlot(); }
    });
    var ticks = 0;
    window.setInterval(function () {
      if (document.visibilityState === "visible" && document.hasFocus() && Date.now() - lastInput < idleMs) {
        active += 1;
        showTime();
      }
      ticks += 1;
      if (ticks % 5 === 0) { saveDraft(); }
    }, 1000);
    document.addEventListener("keydown", onKey);
    setUpHeartbeat();
    setUpLeaseNotice();
    form.setAttribute("data-ready", ""); // shortcuts and drafts are live from here on
    function typedSomething() {
      return draftFields().some(function (element) { return element.type !== "radio" && element.type !== "checkbox" && element.value; });
    }
    var finish = document.querySelector("[data-finish-form]");
    if (finish) {
      finish.addEventListener("submit", function (event) {
        if (typedSomething() && !window.confirm("Finish now? The task on screen will not be saved.")) { event.preventDefault(); }
      });
    }
    var giveBack = document.querySelector("[data-give-back-form]");
    if (giveBack) {
      giveBack.addEventListener("submit", function (event) {
        if (typedSomething() && !window.confirm("Give this task back? What you typed here will not be saved.")) {
          event.preventDefault();
          return;
        }
        clearDraft();
      });
    }
  }

  if (form) { setUpTask(); }
  setUpLightbox();
  document.querySelectorAll("form[data-autosubmit]").forEach(function (handback) { handback.submit(); });
})();
