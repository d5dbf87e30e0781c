"""Money: what the fleet costs and what it may cost.

    costs: billed spend, burn rate, attribution by instance, tag, namespace and job, forecasts.
    budgets, budget_book, budget_evaluation, budget_config: budget rules, the book of budgets,
        what a snapshot makes of them, and budgets declared in the config file.
    catalog: instance types and prices (bundled, refreshed from the cloud, cached).
    calculator: own server vs cloud on-demand vs spot for one training run.
    cost_explorer: the account's billed spend, asked for sparingly.
    cron_costs, idle, attribution, usage: CronJob costs, idle GPUs, who holds a GPU, usage per user.
"""
