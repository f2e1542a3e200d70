output "group_name" {
  description = "provider_config name"
  value       = aws_autoscaling_group.ci.name
}

output "region" {
  description = "provider_config region"
  value       = local.region
}

output "iam_policy_arn" {
  description = "Attach to the role or user berth runs as."
  value       = aws_iam_policy.berth.arn
}

output "iam_policy_json" {
  description = "The same policy as JSON, to review."
  value       = data.aws_iam_policy_document.berth.json
}

output "security_group_id" {
  description = "Security group of the instances."
  value       = aws_security_group.instances.id
}

output "berth_toml" {
  description = "The [autoscaler] part of berth.toml for this group."
  value       = <<-EOT
    [autoscaler]
    provider = "aws"
    max_instances = ${var.max_size}

    [autoscaler.provider_config]
    name = "${aws_autoscaling_group.ci.name}"
    region = "${local.region}"
    ssh_port = ${var.ssh_port}
    suspend = ${var.suspend}

    [autoscaler.provider_config.connector]
    username = "${var.ssh_username}"
    ${var.use_instance_connect ? "use_instance_connect = true" : "key_path = \"/etc/berth/${coalesce(var.key_name, "ci")}.pem\""}
    EOT
}
