"""The wizard's third step: count, image, key pair, network, storage, metadata options, tags.

Key pairs, subnets and security groups of the region, and the default Deep Learning AMI, are
fetched in thread workers when the step first shows (again when the region or workload
changed). Every edit is checked at once with :func:`~gpuconsole.core.ops.provision.validate`; the
message goes under the field that is wrong.
"""

from __future__ import annotations


from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Checkbox, Input, Label, Select, SelectionList, Static

from gpuconsole.core.ops.launch_checks import OptionField, build_options, launch_fields, option_fields
from gpuconsole.core.ops.provision import validate
from gpuconsole.model import (
    KeyPair,
    LaunchSpec,
    MachineImage,
    Market,
    SecurityGroup,
    Subnet,
    Workload,
)
from gpuconsole.ui.wizards.fields import BadNumber, Field, Step, failure, parse_number
from gpuconsole.ui.widgets.marks import TickBox

NO_KEY = ""  # the Select value of "no key pair"
DEFAULT_SUBNET = ""  # the Select value of "the zone's default subnet"
TAGS = ("Name", "Owner", "Project", "Budget")


def os_user() -> str:
    """Who runs the console: the default Owner tag."""
    from gpuconsole.core.access.access import current_user

    return current_user()


class DetailsStep(Step):
    """Step 3: the rest of the :class:`LaunchSpec`, each field checked as it is edited."""

    title = "Details"
    hint = "tab: next field · space ticks a box or group · ctrl+n: review · esc: back"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self.touched: set[str] = set()
        self.subnets: tuple[Subnet, ...] = ()
        self.groups: tuple[SecurityGroup, ...] = ()
        self.image: MachineImage | None = None
        self.image_error = ""
        self._choices_for = ""
        self._image_for: tuple[str, Workload] | None = None
        self._group_options: tuple[str, ...] = ()
        self.options: tuple[OptionField, ...] = ()  # the type's provider's own, shown after the neutral fields

    def compose(self) -> ComposeResult:
        yield Static("", id="details-context", classes="context", markup=False)
        with Horizontal(id="details-columns"):
            with Vertical(id="details-left", classes="column"):
                yield Field("Count", Input("1", compact=True, id="count"), "count")
                yield Field("AMI", Input(placeholder="ami-…", compact=True, id="image"), "image_id")
                yield Field("Key pair", Select([("no key pair", NO_KEY)], value=NO_KEY, allow_blank=False,
                                               compact=True, id="key"), "key_name")
                yield Field("Subnet", Select([("the zone's default", DEFAULT_SUBNET)], value=DEFAULT_SUBNET,
                                             allow_blank=False, compact=True, id="subnet"), "subnet_id")
                yield Field("Root GiB", Input("200", compact=True, id="root"), "root_volume_gib")
                yield Field("Encryption", TickBox("encrypted EBS", value=True, compact=True, id="encrypted"),
                            "encrypted")
                yield Field("KMS key", Input(placeholder="account default key", compact=True, id="kms"),
                            "kms_key_id")
                yield Field("Metadata", TickBox("IMDSv2 required", value=True, compact=True, id="imdsv2"),
                            "imdsv2_required")
                yield Vertical(id="details-options")
            with Vertical(id="details-right", classes="column"):
                for tag in TAGS:
                    value = os_user() if tag == "Owner" else ""
                    yield Field(tag, Input(value, compact=True, id=f"tag-{tag}"), f"tag:{tag}")
                yield Field("Security groups (space picks)", SelectionList[str](id="groups", compact=True),
                            "security_group_ids", stacked=True)
        yield Static("", id="details-note", classes="detail", markup=False)

    def enter(self) -> None:
        choice = self.wizard.choice
        self.query_one("#details-context", Static).update(choice.describe())
        if choice.instance_type is not None:
            self._declared_fields(choice.instance_type.name)
            self._show_options(choice.instance_type.name)
        if self._choices_for != choice.region:
            self._choices_for = choice.region
            self.query_one("#details-note", Static).update("Loading key pairs, subnets and security groups…")
            self.load_choices(choice.region)
        if self._image_for != (choice.region, choice.workload):
            self._image_for = (choice.region, choice.workload)
            self.load_image(choice.region, choice.workload)
        self._show_subnets()
        self.check()
        self.query_one("#count", Input).focus()

    def _declared_fields(self, instance_type: str) -> None:
        """Label each field as the type's provider declares it; hide a field it does not declare."""
        declared = dict(launch_fields(instance_type))
        for field in self.query(Field):
            if field.field_name.startswith("tag:"):
                continue
            label = declared.get(field.field_name)
            field.display = label is not None
            if label is not None and label != field.label:
                field.label = label
                field.query_one(".field-label", Label).update(label)

    def _show_options(self, instance_type: str) -> None:
        """The fields of the provider's own options (its Struct's, derived in the core)."""
        wanted = option_fields(instance_type)
        if wanted == self.options:
            return
        self.options = wanted
        box = self.query_one("#details-options", Vertical)
        box.remove_children()
        box.mount(*(Field(o.label, _option_widget(o), o.name) for o in wanted))

    def _option_values(self) -> dict[str, object]:
        values: dict[str, object] = {}
        for option in self.options:
            try:
                widget = self.query_one(f"#{_option_id(option)}")
            except NoMatches:  # not mounted yet: the default stands
                continue
            value = widget.value
            if isinstance(widget, Input):
                value = value.strip()
            if value is not Select.BLANK:
                values[option.name.removeprefix("options.")] = value
        return values

    # ------------------------------------------------------------------ loading
    @work(thread=True, exclusive=True, exit_on_error=False, group="wizard-choices", description="network choices")
    def load_choices(self, region: str) -> None:
        cloud = self.wizard.cloud
        errors: list[str] = []
        keys: tuple[KeyPair, ...] = ()
        subnets: tuple[Subnet, ...] = ()
        groups: tuple[SecurityGroup, ...] = ()
        try:
            keys = cloud.key_pairs(region)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"key pairs: {failure(exc)}")
        try:
            subnets = cloud.subnets(region)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"subnets: {failure(exc)}")
        try:
            groups = cloud.security_groups(region)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"security groups: {failure(exc)}")
        self.app.call_from_thread(self._choices_loaded, region, keys, subnets, groups, errors)

    def _choices_loaded(self, region: str, keys: tuple[KeyPair, ...], subnets: tuple[Subnet, ...],
                        groups: tuple[SecurityGroup, ...], errors: list[str]) -> None:
        if not self.is_attached or region != self._choices_for:
            return
        key_select: Select[str] = self.query_one("#key", Select)
        current = key_select.value
        key_select.set_options([("no key pair", NO_KEY), *((k.name, k.name) for k in keys)])
        if isinstance(current, str) and any(k.name == current for k in keys):
            key_select.value = current
        self.subnets, self.groups = subnets, groups
        self._show_subnets()
        note = self.query_one("#details-note", Static)
        note.update("Could not list " + "; ".join(errors) if errors else "")
        note.set_class(bool(errors), "-error")
        self.check()

    @work(thread=True, exclusive=True, exit_on_error=False, group="wizard-image", description="default AMI")
    def load_image(self, region: str, workload: Workload) -> None:
        try:
            image: MachineImage | None = self.wizard.cloud.default_image(region, workload)
            error = ""
        except Exception as exc:  # noqa: BLE001
            image, error = None, failure(exc)
        self.app.call_from_thread(self._image_loaded, (region, workload), image, error)

    def _image_loaded(self, key: tuple[str, Workload], image: MachineImage | None, error: str) -> None:
        if not self.is_attached or key != self._image_for:
            return
        field = self.query_one("#image", Input)
        previous = self.image.image_id if self.image is not None else ""
        self.image_error = f"no default AMI ({error}): type an AMI id" if error else ""
        if image is not None and field.value.strip() in ("", previous):
            field.value = image.image_id
        self.image = image
        if image is not None and image.name:
            self.query_one("#details-note", Static).update(f"AMI {image.image_id}: {image.name}")
        self.check()

    def _show_subnets(self) -> None:
        """The subnets of the chosen zone (all of them when no zone was chosen), and the
        security groups of their VPC."""
        zone = self.wizard.choice.availability_zone
        here = [s for s in self.subnets if not zone or s.availability_zone in (zone, "")]  # "": spans the region (Azure)
        select: Select[str] = self.query_one("#subnet", Select)
        current = select.value
        options = [("the zone's default", DEFAULT_SUBNET)]
        options += [(f"{s.subnet_id} {s.name or s.cidr}".strip(), s.subnet_id) for s in here]
        select.set_options(options)
        if isinstance(current, str) and any(s.subnet_id == current for s in here):
            select.value = current
        self._show_groups()

    def _show_groups(self) -> None:
        chosen = self.query_one("#subnet", Select).value
        subnet = next((s for s in self.subnets if s.subnet_id == chosen), None)
        if subnet is None:  # the zone's default subnet is in the default VPC
            zone = self.wizard.choice.availability_zone
            subnet = next((s for s in self.subnets if s.default_for_az and (not zone or s.availability_zone in (zone, ""))), None)
        groups = [g for g in self.groups if subnet is None or g.vpc_id == subnet.vpc_id] or list(self.groups)
        ids = tuple(g.group_id for g in groups)
        if ids == self._group_options:
            return
        self._group_options = ids
        box: SelectionList[str] = self.query_one("#groups", SelectionList)
        picked = set(box.selected)
        box.clear_options()
        box.add_options([(f"{g.name} {g.group_id}", g.group_id, g.group_id in picked) for g in groups])

    # ------------------------------------------------------------------ checking
    @on(Input.Changed)
    @on(Select.Changed)
    @on(Checkbox.Changed)
    @on(SelectionList.SelectedChanged)
    def _edited(self, event: Input.Changed | Select.Changed | Checkbox.Changed | SelectionList.SelectedChanged) -> None:
        field = next((a for a in event.control.ancestors if isinstance(a, Field)), None)
        if field is not None:
            self.touched.add(field.field_name)
        if event.control.id == "subnet":
            self._show_groups()
        if event.control.id == "encrypted":
            self.query_one("#kms", Input).disabled = not self.query_one("#encrypted", Checkbox).value
        self.check()

    def build(self) -> tuple[LaunchSpec | None, dict[str, str]]:
        """The spec the fields spell, and what is wrong with it (field → message, form order)."""
        choice = self.wizard.choice
        if choice.instance_type is None:
            return None, {"instance_type": "choose an instance type first"}
        problems: dict[str, str] = {}

        def number(widget_id: str, name: str, default: int) -> int:
            try:
                value = parse_number(self.query_one(f"#{widget_id}", Input).value, int, "a whole number")
            except BadNumber as exc:
                problems[name] = str(exc)
                return default
            if value is None:
                problems[name] = "required"
                return default
            return value

        count = number("count", "count", 1)
        root = number("root", "root_volume_gib", 200)
        image = self.query_one("#image", Input).value.strip()
        if not image and self.image_error:
            problems["image_id"] = self.image_error
        key = self.query_one("#key", Select).value
        subnet = self.query_one("#subnet", Select).value
        encrypted = self.query_one("#encrypted", Checkbox).value
        tags = tuple((tag, value) for tag in TAGS if (value := self.query_one(f"#tag-{tag}", Input).value.strip()))
        options, wrong = build_options(choice.instance_type.name, self._option_values())
        problems.update(wrong)
        spec = LaunchSpec(
            region=choice.region,
            instance_type=choice.instance_type.name,
            image_id=image,
            market=choice.market,
            count=count,
            availability_zone=choice.availability_zone,
            subnet_id=subnet if isinstance(subnet, str) else DEFAULT_SUBNET,
            security_group_ids=tuple(self.query_one("#groups", SelectionList).selected),
            key_name=key if isinstance(key, str) else NO_KEY,
            root_volume_gib=root,
            encrypted=encrypted,
            kms_key_id=self.query_one("#kms", Input).value.strip() if encrypted else "",
            imdsv2_required=self.query_one("#imdsv2", Checkbox).value,
            max_spot_price=choice.max_spot_price if choice.market is Market.SPOT else None,
            tags=tags,
            options=options,
        )
        try:
            found = validate(spec)
        except Exception as exc:  # noqa: BLE001 - a checker failure must not stop the form
            found = {"spec": failure(exc)}
        for name, message in found.items():
            problems.setdefault(name, message)
        return spec, problems

    def check(self, *, everything: bool = False) -> str | None:
        """Validate the fields; messages under the edited ones (all with ``everything``)."""
        _spec, problems = self.build()
        return self.show_problems(problems, None if everything else self.touched)

    def commit(self) -> str | None:
        spec, problems = self.build()
        first = self.show_problems(problems)
        if first or spec is None:
            for item in self.fields():
                if item.message:
                    item.widget.focus()
                    break
            return first or "the request is incomplete"
        self.wizard.spec = spec
        return None


def _option_id(option: OptionField) -> str:
    return "opt-" + option.name.removeprefix("options.").replace("_", "-")


def _option_widget(option: OptionField) -> Input | Select[object] | TickBox:
    """A choice as a Select (the cloud's default first), a flag as a tick box, a number as an input."""
    if option.kind == "choice":
        return Select([(str(v), v) for v in option.choices], value=option.default, allow_blank=False,
                      compact=True, id=_option_id(option))
    if option.kind == "flag":
        return TickBox("on", value=bool(option.default), compact=True, id=_option_id(option))
    return Input(str(option.default), compact=True, id=_option_id(option))
