"""Where a researcher chooses a verification stage's worker model, what each would cost to fit
(issue 41; annotation/worker_model_costs.py): the choice names each model's time per 100,000
answers and at the stage's size, and saving a model that would take over a few minutes a fit says
so."""

from django.contrib import messages

from annotation import worker_model_costs
from annotation.models import Stage


class WorkerModelChoiceMixin:
    """For StageConfig's admin and its inline on a family's page."""

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "aggregation" and field is not None:
            field.help_text = (f"{field.help_text} Each run of the job fits every counted verification answer: "
                               f"{worker_model_costs.per_100k_text()} per 100,000 answers "
                               "(benchmarks/worker_model_times.py).")
        return field

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        _with_estimate(form, obj, request.user)
        return form

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        config = obj.stage_configs.filter(stage=Stage.VERIFICATION).first() if obj is not None else None
        _with_estimate(formset.form, config, request.user)
        return formset

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        warn_of_slow_fits(self, request, [obj])


def _with_estimate(form, config, user):
    field = form.base_fields.get("aggregation")
    estimate = worker_model_costs.verification_fit_times(config, user)
    if field is not None and estimate:
        field.help_text = f"{field.help_text} {estimate}"


def warn_of_slow_fits(modeladmin, request, configs):
    for config in configs:
        if warning := worker_model_costs.slow_fit_warning(config, request.user):
            modeladmin.message_user(request, warning, messages.WARNING)
