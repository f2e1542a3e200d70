# An EC2 Auto Scaling group for berth's AWS provider (provider = "aws"): the
# launch template, the group, the security group of its instances and the
# least-privilege IAM policy berth needs. berth sets the group's desired
# capacity itself; Terraform only creates the group and then leaves that
# number alone.

terraform {
  required_version = ">= 1.3"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
  }
}

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  region    = data.aws_region.current.name
  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition
  group_arn = "arn:${local.partition}:autoscaling:${local.region}:${local.account}:autoScalingGroup:*:autoScalingGroupName/${var.name}"
  instances = "arn:${local.partition}:ec2:${local.region}:${local.account}:instance/*"
  spot      = var.on_demand_percentage < 100
}

# The instances accept SSH from berth only and may reach anything (jobs clone
# repositories, pull packages).
resource "aws_security_group" "instances" {
  name_prefix = "${var.name}-"
  description = "berth CI instances: SSH from berth"
  vpc_id      = var.vpc_id

  ingress {
    description     = "SSH from berth"
    from_port       = var.ssh_port
    to_port         = var.ssh_port
    protocol        = "tcp"
    cidr_blocks     = var.berth_cidr_blocks
    security_groups = var.berth_security_group_ids
  }

  egress {
    description      = "jobs reach the network"
    from_port        = 0
    to_port          = 0
    protocol         = "-1"
    cidr_blocks      = ["0.0.0.0/0"]
    ipv6_cidr_blocks = ["::/0"]
  }

  lifecycle {
    create_before_destroy = true
    precondition {
      condition     = length(var.berth_cidr_blocks) + length(var.berth_security_group_ids) > 0
      error_message = "Set berth_cidr_blocks or berth_security_group_ids: berth must reach the instances over SSH."
    }
  }
}

resource "aws_launch_template" "ci" {
  name_prefix   = "${var.name}-"
  image_id      = var.ami_id
  instance_type = var.instance_types[0]
  key_name      = var.key_name

  vpc_security_group_ids = [aws_security_group.instances.id]

  # Jobs must not reach the instance role's credentials through the metadata
  # service more easily than necessary: IMDSv2 only, one hop (a container on
  # the instance cannot reach it). Give the instances no role unless jobs
  # need one.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  # berth reads the host keys cloud-init prints to the console at first boot
  # (GetConsoleOutput). cloud-init does so by default; the user data only
  # makes sure an image's own configuration did not turn it off.
  user_data = base64encode(<<-EOT
    #cloud-config
    ssh:
      emit_keys_to_console: true
    EOT
  )

  block_device_mappings {
    device_name = var.root_device_name
    ebs {
      volume_size           = var.root_volume_gb
      volume_type           = "gp3"
      encrypted             = true
      delete_on_termination = true
    }
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { Name = var.name })
  }
}

resource "aws_autoscaling_group" "ci" {
  name                = var.name
  min_size            = 0 # berth must be able to remove the last instance
  max_size            = var.max_size
  desired_capacity    = 0
  vpc_zone_identifier = var.subnet_ids
  health_check_type   = "EC2"
  # berth protects every instance it holds; new instances start unprotected.
  protect_from_scale_in = false

  mixed_instances_policy {
    instances_distribution {
      on_demand_base_capacity                  = 0
      on_demand_percentage_above_base_capacity = var.on_demand_percentage
      spot_allocation_strategy                 = "price-capacity-optimized"
    }
    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.ci.id
        version            = aws_launch_template.ci.latest_version
      }
      dynamic "override" {
        for_each = var.instance_types
        content {
          instance_type = override.value
        }
      }
    }
  }

  dynamic "tag" {
    for_each = var.tags
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  lifecycle {
    # berth owns the group's size: a terraform apply must not reset it.
    ignore_changes = [desired_capacity]
    precondition {
      condition     = !(var.suspend && local.spot)
      error_message = "suspend = true needs an On-Demand group (on_demand_percentage = 100): EC2 cannot stop the one-time Spot instances Auto Scaling launches."
    }
  }
}

# What berth's AWS provider calls, and nothing more. Describe calls cannot
# be scoped to a resource; everything that changes something is limited to
# this group or its instances (Auto Scaling tags each instance with
# aws:autoscaling:groupName).
data "aws_iam_policy_document" "berth" {
  statement {
    sid       = "Read"
    resources = ["*"]
    actions   = ["autoscaling:DescribeAutoScalingGroups", "ec2:DescribeInstances"]
  }

  statement {
    sid       = "Scale"
    resources = [local.group_arn]
    actions = concat(
      ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup", "autoscaling:SetInstanceProtection"],
      var.suspend ? ["autoscaling:EnterStandby", "autoscaling:ExitStandby"] : [],
    )
  }

  statement {
    sid       = "Instances"
    resources = [local.instances]
    actions = concat(
      ["ec2:GetConsoleOutput"],
      var.suspend ? ["ec2:StopInstances", "ec2:StartInstances"] : [],
    )
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/aws:autoscaling:groupName"
      values   = [var.name]
    }
  }

  dynamic "statement" {
    for_each = var.use_instance_connect ? [var.ssh_username] : []
    content {
      sid       = "InstanceConnect"
      resources = [local.instances]
      actions   = ["ec2-instance-connect:SendSSHPublicKey"]
      condition {
        test     = "StringEquals"
        variable = "aws:ResourceTag/aws:autoscaling:groupName"
        values   = [var.name]
      }
      condition {
        test     = "StringEquals"
        variable = "ec2:osuser"
        values   = [statement.value]
      }
    }
  }
}

resource "aws_iam_policy" "berth" {
  name_prefix = "${var.name}-berth-"
  description = "What berth's AWS provider needs to scale Auto Scaling group ${var.name}"
  policy      = data.aws_iam_policy_document.berth.json
}
